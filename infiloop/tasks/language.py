"""Generated text tasks for LoopLM (the looped-language-model study's knowledge vs reasoning contrast), offline.

Three tasks, each a word-level vocabulary and token-id tensors: a training split and a held-out test split per
depth. Every item ends with its answer word after a query; the model is scored by exact match on the answer
positions (``Split.answer``). Everything is deterministic from ``LanguageConfig.seed``.

* ``knowledge`` — facts about generated people (city, job, pet), each stated in training (``bako lives in
  paris``) and asked with question templates; the test asks every fact with the one question template held out
  for it (the template and the fact are seen in training, never together). Memorised knowledge; depth 1.
* ``kinship`` — CLUTRR-style: a chain of k stated relations ``e_i is e_{i-1} 's r_i .`` between generated
  people, and the query ``who is e_k to e_0 ?``; the answer is the composed relation (``compose``). Depth k.
* ``mixture`` — the knowledge items and the kinship items (statements shuffled) in one training split, as the
  study trains one language model on one corpus and evaluates it on both kinds of task (its summary,
  "Methodology": knowledge tasks and reasoning tasks of one model); the test splits keep each kind apart: depth 1
  is knowledge, depths 2-10 kinship (``kinds``). The kinship stories use other names than the knowledge's people.
* ``rules`` — ProofWriter-style: facts ``e is a .``, rules ``a people are b .`` and the query ``is e z ?``,
  answered ``true`` / ``false`` under the closed-world assumption; depth = the rule applications of the proof
  (of the decoy's proof for ``false``: another person has the query's attribute at that depth). Balanced labels.

Kinship relations live on the family tree as (u, v, gender): the relative is reached by going u generations up
from the person and v down on another branch (brother = (1, 1), uncle = (2, 1), cousin = (2, 2)); a parent or
child position is a couple. ``compose_position`` gives the position of R's relative S from X's relative R, and
refuses the compositions that the words do not decide (an in-law, X itself, or a branch that may be X's own).
"""

from __future__ import annotations

import functools
import random
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from ..config import from_dict

TASKS = ("knowledge", "kinship", "rules", "mixture")
PAD = "<pad>"

KIN = {"father": (1, 0, "m"), "mother": (1, 0, "f"), "grandfather": (2, 0, "m"), "grandmother": (2, 0, "f"),
       "son": (0, 1, "m"), "daughter": (0, 1, "f"), "grandson": (0, 2, "m"), "granddaughter": (0, 2, "f"),
       "brother": (1, 1, "m"), "sister": (1, 1, "f"), "uncle": (2, 1, "m"), "aunt": (2, 1, "f"),
       "nephew": (1, 2, "m"), "niece": (1, 2, "f"), "cousin": (2, 2, None)}
_KIN_NAME = {pos: name for name, pos in KIN.items()}

ATTRIBUTES = {  # knowledge: attribute -> (values, statement template, question templates); E entity, V value
    "city": (("paris", "lima", "oslo", "cairo", "delhi", "quito", "rome", "seoul"), "E lives in V",
             ("where does E live ? V", "which city is E from ? V", "E is from the city of V",
              "the home town of E is V")),
    "job": (("baker", "nurse", "pilot", "judge", "farmer", "tailor", "singer", "miner"), "E works as a V",
            ("what does E do ? V", "what is the job of E ? V", "E earns a living as a V", "the job of E is V")),
    "pet": (("cat", "dog", "horse", "parrot", "rabbit", "turtle", "goat", "snake"), "E owns a V",
            ("which pet does E have ? V", "what animal does E keep ? V", "E has a pet V", "the pet of E is a V")),
}
ADJECTIVES = ("red", "blue", "green", "big", "small", "kind", "rough", "quiet", "young", "old", "cold", "round",
              "smart", "nice", "furry", "white", "tall", "calm", "bold", "shy", "quick", "wild", "soft", "sharp")
DEFAULT_DEPTHS = {"knowledge": ((1,), (1,)), "kinship": ((2, 3, 4), tuple(range(2, 11))),
                  "rules": ((0, 1, 2, 3), tuple(range(6))), "mixture": ((2, 3, 4), tuple(range(2, 11)))}


def _name_pool() -> list[str]:
    """600 two-syllable names in a fixed order, none of them a word of the tasks."""
    cons, vows = "bdfgklmnprstvz", "aeiou"
    syl = [c + v for c in cons for v in vows]
    taken = {*ADJECTIVES, *KIN, *(w for vals, st, qs in ATTRIBUTES.values() for t in (*vals, st, *qs)
                                  for w in t.split())}
    pairs = [a + b for a in syl for b in syl if a != b and a + b not in taken]
    return random.Random("names").sample(pairs, 600)


NAME_POOL = _name_pool()


def names(n: int) -> list[str]:
    """The first ``n`` of the generated two-syllable names (the same for every seed)."""
    if n > len(NAME_POOL):
        raise ValueError(f"at most {len(NAME_POOL)} generated names, asked for {n}")
    return NAME_POOL[:n]


# --------------------------------------------------------------------------------------------------
# Kinship composition
# --------------------------------------------------------------------------------------------------


def compose_position(r: tuple[int, int], e: tuple[int, int]) -> tuple[int, int] | None:
    """Position of S relative to X, where R is at ``r = (u1, v1)`` from X and S at ``e = (u2, v2)`` from R.

    Going down from R keeps X's common ancestor: (u1, v1 + v2), except from X's own line (v1 = 0), where only
    the parent's other child (father's son = brother) is decided. Going up from R:

    - u2 < v1 (stays below the common ancestor on R's side): one step to a couple of a blood relative and an
      in-law, then down on another branch: (u1, v1 - 1 + v2); up further or stopping there is undecided;
    - u2 = v1 = 1 (to the common ancestor): stopping gives X's ancestor (u1, 0) (X itself when u1 = 0: refused);
      down on another branch gives X's other children (0, v2) or, for u1 = 1 and v2 = 1, X's sibling;
    - u2 > v1 (past the common ancestor, X's ancestors, v1 <= 1, u1 >= 1): (u1 + u2 - v1, v2).

    Every other case (the words leave it to the family) returns None.
    """
    (u1, v1), (u2, v2) = r, e
    if u2 == 0:
        if v1 > 0:
            return u1, v1 + v2
        return (1, 1) if (u1, v2) == (1, 1) else None
    if u2 < v1:
        return (u1, v1 - 1 + v2) if u2 == 1 and v2 > 0 else None
    if u2 == v1:
        if u2 != 1:
            return None
        if v2 == 0:
            return (u1, 0) if u1 > 0 else None
        return (0, v2) if u1 == 0 else (1, 1) if (u1, v2) == (1, 1) else None
    return (u1 + u2 - v1, v2) if v1 <= 1 and u1 >= 1 else None


@functools.cache  # a few million calls to generate a task: the table of 16 x 15 answers, once
def compose(r: str | None, e: str) -> str | None:
    """The relation of S to X where R is X's ``r`` (None: R is X) and S is R's ``e``; None where undecided or
    outside the relations of ``KIN``. The gender is the last relation's."""
    if r is None:
        return e
    pos = compose_position(KIN[r][:2], KIN[e][:2])
    if pos is None:
        return None
    return _KIN_NAME.get((*pos, None if pos == (2, 2) else KIN[e][2]))


def _chain_counts(target: str, k: int) -> list[dict]:
    """ways[L][s]: the relation chains of length L from state s (None: X itself) that end at ``target``."""
    states = [None, *KIN]
    ways = [{s: int(s == target) for s in states}]
    for _ in range(k):
        prev = ways[-1]
        ways.append({s: sum(prev[n] for _, n in _steps(s)) for s in states})
    return ways


@functools.cache
def _steps(s: str | None) -> tuple[tuple[str, str], ...]:
    """(relation e, the state it leads to) for every e of ``KIN`` that composes with state ``s``, in KIN's order."""
    return tuple((e, n) for e in KIN if (n := compose(s, e)) is not None)


def sample_chain(rng: random.Random, target: str, k: int, counts: list[dict]) -> list[str]:
    """A chain of k relations whose composition is ``target``, uniform over all such chains."""
    s, chain = None, []
    for step in range(k):
        left = counts[k - step - 1]
        options = [(e, n) for e, n in _steps(s) if left[n]]
        e, s = rng.choices(options, [left[n] for _, n in options])[0]
        chain.append(e)
    return chain


# --------------------------------------------------------------------------------------------------
# Configuration and data
# --------------------------------------------------------------------------------------------------


@dataclass
class LanguageConfig:
    """One generated task, as data.

    task: one of ``TASKS``; seed: everything follows from it.
    n_train: training items (kinship, rules: shared equally among ``train_depths``; knowledge: every fact's
        statement and its seen questions, whatever n_train; mixture: n_train kinship items besides every
        knowledge item); n_test: test items per depth (knowledge: every fact).
    train_depths / test_depths: empty for the task's default (knowledge 1; kinship and mixture's kinship 2-4 /
        2-10; rules 0-3 / 0-5).
    n_entities: knowledge's people; n_names: the name pool of kinship and rules (mixture: the n_names names after
        the knowledge's people).
    shuffle: the story's sentences in random order (None: kinship in chain order, rules and mixture shuffled).
    distractors: rules only, the distractor facts per person and distractor rules.
    """

    task: str = "kinship"
    seed: int = 0
    n_train: int = 3000
    n_test: int = 200
    train_depths: tuple[int, ...] = ()
    test_depths: tuple[int, ...] = ()
    n_entities: int = 100
    n_names: int = 40
    shuffle: bool | None = None
    distractors: int = 1

    def depths(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        default = DEFAULT_DEPTHS.get(self.task, ((), ()))
        return tuple(self.train_depths) or default[0], tuple(self.test_depths) or default[1]

    def validate(self, where: str = "language") -> None:
        def bad(f: str, msg: str) -> None:
            raise ValueError(f"{where}.{f}: {msg}")

        if self.task not in TASKS:
            bad("task", f"unknown task {self.task!r}; valid choices: {', '.join(TASKS)}")
        for f in ("n_train", "n_test", "n_entities"):
            if getattr(self, f) < 1:
                bad(f, f"must be a positive integer, got {getattr(self, f)}")
        lo, hi = {"knowledge": (1, 1), "kinship": (1, 10), "rules": (0, 5), "mixture": (2, 10)}[self.task]
        for f, ds in zip(("train_depths", "test_depths"), self.depths()):
            if any(not lo <= d <= hi for d in ds) or len(set(ds)) != len(ds):
                bad(f, f"{self.task} depths are distinct integers in {lo}..{hi}, got {list(ds)}")
        need = max(self.depths()[1] + self.depths()[0]) + 1 if self.task in ("kinship", "mixture") else 2
        room = len(NAME_POOL) - (self.n_entities if self.task == "mixture" else 0)
        if self.task != "knowledge" and not need <= self.n_names <= room:
            bad("n_names", f"{self.task} needs {need}..{room} names, got {self.n_names}")
        if self.task in ("knowledge", "mixture") and self.n_entities > len(NAME_POOL):
            bad("n_entities", f"at most {len(NAME_POOL)} generated names, got {self.n_entities}")
        if self.distractors < 0 or self.distractors > 2:
            bad("distractors", f"must be 0, 1 or 2, got {self.distractors}")

    def story_names(self) -> list[str]:
        """The names of kinship's and rules' stories: the first ``n_names`` of the pool, or, in a mixture, the
        ``n_names`` after the knowledge's ``n_entities`` people (so that no story is about a person of the facts)."""
        start = self.n_entities if self.task == "mixture" else 0
        return NAME_POOL[start: start + self.n_names]

    def kinds(self) -> dict[str, tuple[int, ...]]:
        """The test depths of each kind of task the data hold: ``{task: depths}``; a mixture's knowledge is depth 1,
        its kinship the kinship depths."""
        if self.task == "mixture":
            return {"knowledge": (1,), "kinship": self.depths()[1]}
        return {self.task: self.depths()[1]}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str = "language") -> LanguageConfig:
        return from_dict(cls, d, where)


@dataclass
class Split:
    """Items as token ids: ``tokens`` [N, L] (right-padded with 0), ``answer`` [N, L] bool (the answer words,
    predicted from the positions before them), ``depth`` [N]."""

    tokens: Tensor
    answer: Tensor
    depth: Tensor

    def __len__(self) -> int:
        return self.tokens.shape[0]


@dataclass
class LanguageData:
    """A generated task: its vocabulary (id -> word; 0 is the pad), training split, test split per depth."""

    config: LanguageConfig
    vocab: list[str]
    train: Split
    test: dict[int, Split]

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def max_len(self) -> int:
        return max(s.tokens.shape[1] for s in (self.train, *self.test.values()))

    def words(self, split: Split, i: int) -> list[str]:
        """The words of item i (no padding)."""
        return [self.vocab[t] for t in split.tokens[i].tolist() if t != 0]


def _encode(items: list[tuple[list[str], int, int]], index: dict[str, int]) -> Split:
    """(words, number of answer words at the end, depth) -> a Split."""
    L = max(len(w) for w, _, _ in items)
    tokens = torch.zeros(len(items), L, dtype=torch.long)
    answer = torch.zeros(len(items), L, dtype=torch.bool)
    for i, (words, n_ans, _) in enumerate(items):
        tokens[i, : len(words)] = torch.tensor([index[w] for w in words])
        answer[i, len(words) - n_ans: len(words)] = True
    return Split(tokens, answer, torch.tensor([d for _, _, d in items], dtype=torch.long))


# --------------------------------------------------------------------------------------------------
# The three generators: items as (words, answer length, depth)
# --------------------------------------------------------------------------------------------------


def _knowledge(cfg: LanguageConfig, rng: random.Random) -> tuple[list, dict[int, list]]:
    people = names(cfg.n_entities)
    train, test = [], []
    for values, statement, questions in ATTRIBUTES.values():
        held = [i % len(questions) for i in range(len(people))]
        rng.shuffle(held)  # each question template is held out for a quarter of the people
        assigned = [values[i % len(values)] for i in range(len(people))]
        rng.shuffle(assigned)  # each value for an eighth of the people
        for person, h, value in zip(people, held, assigned):

            said = [[person if w == "E" else value if w == "V" else w for w in t.split()]
                    for t in (statement, *questions)]
            train += [(said[0], 1, 1)] + [(said[1 + j], 1, 1) for j in range(len(questions)) if j != h]
            test.append((said[1 + h], 1, 1))
    rng.shuffle(train)
    return train, {1: test}


def _kinship_item(cfg: LanguageConfig, rng: random.Random, k: int, target: str, counts: list[dict],
                  shuffle: bool) -> tuple[list[str], int, int]:
    chain = sample_chain(rng, target, k, counts)
    people = rng.sample(cfg.story_names(), k + 1)
    sentences = [[people[i + 1], "is", people[i], "'s", r, "."] for i, r in enumerate(chain)]
    if shuffle:
        rng.shuffle(sentences)
    words = [w for s in sentences for w in s] + ["who", "is", people[k], "to", people[0], "?", target]
    return words, 1, k


def _kinship(cfg: LanguageConfig, rng: random.Random, depth: int, n: int, shuffle: bool) -> list:
    """n items of chain length ``depth``, the answers cycling through the relations reachable at that length."""
    counts = {t: _chain_counts(t, depth) for t in KIN}
    targets = [t for t in KIN if counts[t][depth][None]]
    order = [targets[i % len(targets)] for i in range(n)]
    rng.shuffle(order)
    return [_kinship_item(cfg, rng, depth, t, counts[t], shuffle) for t in order]


def _rules_item(cfg: LanguageConfig, rng: random.Random, d: int, truth: bool, shuffle: bool
                ) -> tuple[list[str], int, int]:
    """Two people, two rule chains a_0 -> ... -> a_d and b_0 -> ... -> b_d; one person is a_0, the other b_0;
    the query asks whether the query person has the end of the query chain (true iff it has its start)."""
    e, f = rng.sample(cfg.story_names(), 2)
    adj = rng.sample(ADJECTIVES, 2 * (d + 1) + 2 * cfg.distractors + 1)
    a, b, extra = adj[: d + 1], adj[d + 1: 2 * d + 2], adj[2 * d + 2:]
    if rng.random() < 0.5:
        a, b = b, a
    facts = [[e, "is", a[0], "."], [f, "is", b[0], "."]]
    for i in range(cfg.distractors):  # distractor facts and a distractor rule, off both chains
        facts += [[e, "is", extra[2 * i], "."], [f, "is", extra[2 * i + 1], "."]]
    rules = [[c[i], "people", "are", c[i + 1], "."] for c in (a, b) for i in range(d)]
    rules += [[extra[2 * i + rng.randint(0, 1)], "people", "are", extra[-1], "."] for i in range(cfg.distractors)]
    sentences = facts + rules
    if shuffle:
        rng.shuffle(sentences)
    who, chain = (e, a) if truth else (e, b)
    if rng.random() < 0.5:  # ask about either person
        who, chain = (f, b) if truth else (f, a)
    words = [w for s in sentences for w in s] + ["is", who, chain[-1], "?", "true" if truth else "false"]
    return words, 1, d


def _rules(cfg: LanguageConfig, rng: random.Random, depth: int, n: int, shuffle: bool) -> list:
    truths = [i % 2 == 0 for i in range(n)]
    rng.shuffle(truths)
    return [_rules_item(cfg, rng, depth, t, shuffle) for t in truths]


def vocabulary(cfg: LanguageConfig) -> list[str]:
    """The task's words (id -> word, 0 the pad), the same for every seed."""
    if cfg.task == "knowledge":
        words = [w for _, (vals, st, qs) in ATTRIBUTES.items() for t in (st, *qs) for w in t.split()] + [
            v for vals, _, _ in ATTRIBUTES.values() for v in vals] + names(cfg.n_entities)
    elif cfg.task == "kinship":
        words = ["is", "'s", ".", "who", "to", "?", *KIN, *cfg.story_names()]
    elif cfg.task == "mixture":
        words = [*vocabulary(LanguageConfig(task="knowledge", n_entities=cfg.n_entities))[1:],
                 "is", "'s", ".", "who", "to", "?", *KIN, *cfg.story_names()]
    else:
        words = ["is", ".", "people", "are", "?", "true", "false", *ADJECTIVES, *cfg.story_names()]
    return [PAD, *dict.fromkeys(w for w in words if w not in ("E", "V"))]


def _stories(cfg: LanguageConfig, rng: random.Random) -> tuple[list, dict[int, list]]:
    """Kinship's or rules' items (a mixture's kinship): training items shared among the training depths, and
    ``n_test`` test items per test depth, none of them a training item."""
    make = _rules if cfg.task == "rules" else _kinship
    shuffle = cfg.shuffle if cfg.shuffle is not None else cfg.task in ("rules", "mixture")
    train_depths, test_depths = cfg.depths()
    per = [cfg.n_train // len(train_depths) + (i < cfg.n_train % len(train_depths))
           for i in range(len(train_depths))]
    train = [it for d, n in zip(train_depths, per) for it in make(cfg, rng, d, n, shuffle)]
    rng.shuffle(train)
    seen = {tuple(w) for w, _, _ in train}
    test = {}
    for d in test_depths:  # generate extra, keep the first n_test not seen in training
        items = [it for it in make(cfg, rng, d, 2 * cfg.n_test, shuffle) if tuple(it[0]) not in seen]
        test[d] = _balanced(items, cfg.n_test)
    return train, test


def generate(cfg: LanguageConfig) -> LanguageData:
    """The task of ``cfg``: training split and test split per depth, test items never in training (a mixture: the
    knowledge's and the kinship's items in one training split, their test splits by depth, ``LanguageConfig.kinds``)."""
    cfg.validate()
    rng = random.Random(f"{cfg.task}:{cfg.seed}")
    vocab = vocabulary(cfg)
    index = {w: i for i, w in enumerate(vocab)}
    if cfg.task == "knowledge":
        train, test = _knowledge(cfg, rng)
    elif cfg.task == "mixture":
        train, test = _knowledge(cfg, rng)
        kin_train, kin_test = _stories(cfg, rng)
        train, test = train + kin_train, {**test, **kin_test}
        rng.shuffle(train)
    else:
        train, test = _stories(cfg, rng)
    return LanguageData(cfg, vocab, _encode(train, index), {d: _encode(v, index) for d, v in test.items()})


def _balanced(items: list, n: int) -> list:
    """The first n items, taking the answers in turn so that their counts stay balanced."""
    by: dict[str, list] = {}
    for it in items:
        by.setdefault(it[0][-1], []).append(it)
    out, keys = [], sorted(by)
    while len(out) < n and any(by.values()):
        for key in keys:
            if by[key] and len(out) < n:
                out.append(by[key].pop(0))
    return out
