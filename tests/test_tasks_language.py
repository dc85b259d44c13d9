"""The generated text tasks of LoopLM: determinism, every answer checked by a solver written here, held-out
splits, depth labels, the vocabulary and the balance of the labels."""

from collections import Counter
from functools import cache

import pytest
import torch

from infiloop.tasks.language import ATTRIBUTES, KIN, NAME_POOL, LanguageConfig, compose, generate, names

SMALL = {"knowledge": dict(n_entities=60), "kinship": dict(n_train=300, n_test=60),
         "rules": dict(n_train=300, n_test=60)}


@cache
def _data(task: str, seed: int = 0, shuffle=None):
    return generate(LanguageConfig(task=task, seed=seed, shuffle=shuffle, **SMALL[task]))


def _items(data, split):
    return [data.words(split, i) for i in range(len(split))]


# ------------------------------------------------------------------ independent solvers


def _kin_solver(story: list[str]) -> tuple[str, int]:
    """The relation of the query's first person to its second on an explicit tree: people are paths from a root,
    a relation (u, v) goes u parents up and v fresh children down; the answer's (u, v) is read off the longest
    common prefix. Statements may come in any order: they are followed from the query's second person."""
    sentences, query = story[: story.index("who")], story[story.index("who"):]
    assert query[0:2] == ["who", "is"] and query[3] == "to" and query[5] == "?"
    edges = {}  # e_{i-1} -> (e_i, relation)
    for k in range(0, len(sentences), 6):
        new, is_, old, s, rel, dot = sentences[k: k + 6]
        assert (is_, s, dot) == ("is", "'s", ".") and rel in KIN
        edges[old] = (new, rel)
    fresh = iter(range(10**6))
    x = (0,) * 40
    node, person = x, query[4]
    while person != query[2]:
        person, rel = edges[person]
        u, v = {"father": (1, 0), "mother": (1, 0), "grandfather": (2, 0), "grandmother": (2, 0),
                "son": (0, 1), "daughter": (0, 1), "grandson": (0, 2), "granddaughter": (0, 2),
                "brother": (1, 1), "sister": (1, 1), "uncle": (2, 1), "aunt": (2, 1),
                "nephew": (1, 2), "niece": (1, 2), "cousin": (2, 2)}[rel]
        node = node[: len(node) - u] + tuple(1 + next(fresh) for _ in range(v))
        last = rel
    lcp = next(i for i in range(len(x) + 1) if i == len(x) or i == len(node) or x[i] != node[i])
    pos = (len(x) - lcp, len(node) - lcp)
    male = last in ("father", "grandfather", "son", "grandson", "brother", "uncle", "nephew")
    names = {(1, 0): ("father", "mother"), (2, 0): ("grandfather", "grandmother"), (0, 1): ("son", "daughter"),
             (0, 2): ("grandson", "granddaughter"), (1, 1): ("brother", "sister"), (2, 1): ("uncle", "aunt"),
             (1, 2): ("nephew", "niece"), (2, 2): ("cousin", "cousin")}
    return names[pos][0 if male else 1], len(edges)


def _rules_solver(story: list[str]) -> tuple[str, int]:
    """Forward chaining under the closed world: the answer, and the proof depth of the query for its person
    (true) or, for false, the least depth at which anyone has the query's attribute."""
    body, query = story[:-4], story[-4:]
    assert query[0] == "is" and query[3] == "?"
    facts, rules, k = {}, [], 0
    while k < len(body):
        if body[k + 1] == "is":
            facts[(body[k], body[k + 2])] = 0
            k += 4
        else:
            assert body[k + 1: k + 3] == ["people", "are"] and body[k + 4] == "."
            rules.append((body[k], body[k + 3]))
            k += 5
    changed = True
    while changed:
        changed = False
        for (who, attr), depth in list(facts.items()):
            for pre, post in rules:
                if pre == attr and facts.get((who, post), 99) > depth + 1:
                    facts[(who, post)] = depth + 1
                    changed = True
    who, attr = query[1], query[2]
    if (who, attr) in facts:
        return "true", facts[(who, attr)]
    return "false", min(d for (_, a), d in facts.items() if a == attr)


def _knowledge_facts(data) -> dict[tuple[str, str], str]:
    """(person, attribute) -> value, read from the training statements."""
    facts = {}
    for words in _items(data, data.train):
        for attr, (_, statement, _) in ATTRIBUTES.items():
            tpl = statement.split()
            if len(words) == len(tpl) and all(t in ("E", "V") or t == w for t, w in zip(tpl, words)):
                person, value = words[tpl.index("E")], words[tpl.index("V")]
                assert facts.setdefault((person, attr), value) == value
    return facts


def _knowledge_query(words: list[str]) -> tuple[str, str]:
    for attr, (_, _, questions) in ATTRIBUTES.items():
        for q in questions:
            tpl = q.split()
            if len(words) == len(tpl) and all(t in ("E", "V") or t == w for t, w in zip(tpl, words)):
                return words[tpl.index("E")], attr
    raise AssertionError(f"no template reads {' '.join(words)}")


# ------------------------------------------------------------------ tests


def test_the_composition_rules():
    told = {("father", "father"): "grandfather", ("mother", "brother"): "uncle", ("father", "sister"): "aunt",
            ("brother", "son"): "nephew", ("sister", "daughter"): "niece", ("son", "son"): "grandson",
            ("daughter", "daughter"): "granddaughter", ("father", "son"): "brother", ("mother", "daughter"): "sister",
            ("uncle", "son"): "cousin", ("aunt", "daughter"): "cousin", ("brother", "brother"): "brother",
            ("sister", "father"): "father", ("brother", "grandmother"): "grandmother",
            ("brother", "uncle"): "uncle", ("son", "sister"): "daughter", ("nephew", "sister"): "niece",
            ("grandson", "brother"): "grandson", ("cousin", "sister"): "cousin", ("brother", "cousin"): "cousin",
            ("mother", "mother"): "grandmother", ("daughter", "son"): "grandson"}
    for (r, e), want in told.items():
        assert compose(r, e) == want, (r, e)
    undecided = [("son", "mother"),  # X or X's wife
                 ("grandfather", "son"),  # father or uncle
                 ("nephew", "father"),  # brother or brother-in-law
                 ("son", "grandfather"),  # X's father or father-in-law
                 ("uncle", "brother"),  # father or uncle
                 ("nephew", "uncle"),  # X, X's brother or the in-law's brother
                 ("father", "grandson"),  # X's son or nephew
                 ("grandfather", "father")]  # outside the relations (great-grandfather)
    for r, e in undecided:
        assert compose(r, e) is None, (r, e)
    assert all(compose(None, e) == e for e in KIN)


def test_determinism_by_seed():
    for task in SMALL:
        a, b = generate(LanguageConfig(task=task, seed=3, **SMALL[task])), _data(task, 3)
        assert a.vocab == b.vocab and torch.equal(a.train.tokens, b.train.tokens)
        assert all(torch.equal(a.test[d].tokens, b.test[d].tokens) for d in a.test)
        assert not torch.equal(_data(task, 0).train.tokens, b.train.tokens)


@pytest.mark.parametrize("shuffle", [None, True])
def test_every_kinship_answer_is_the_tree_s(shuffle):
    data = _data("kinship", shuffle=shuffle)
    for split in (data.train, *data.test.values()):
        for i, words in enumerate(_items(data, split)):
            answer, depth = _kin_solver(words[:-1])
            assert words[-1] == answer, " ".join(words)
            assert int(split.depth[i]) == depth


@pytest.mark.parametrize("shuffle", [None, False])
def test_every_rules_answer_is_forward_chaining_s(shuffle):
    data = _data("rules", shuffle=shuffle)
    for split in (data.train, *data.test.values()):
        for i, words in enumerate(_items(data, split)):
            answer, depth = _rules_solver(words[:-1])
            assert (words[-1], int(split.depth[i])) == (answer, depth), " ".join(words)


def test_every_knowledge_answer_is_the_stated_fact():
    data = _data("knowledge")
    facts = _knowledge_facts(data)
    assert len(facts) == 60 * len(ATTRIBUTES)
    for words in _items(data, data.train) + _items(data, data.test[1]):
        if words[1] in ("lives", "works", "owns"):
            continue
        assert words[-1] == facts[_knowledge_query(words)], " ".join(words)


def test_the_test_items_are_never_trained_on():
    for task in SMALL:
        data = _data(task)
        train = {tuple(w) for w in _items(data, data.train)}
        for split in data.test.values():
            assert not train & {tuple(w) for w in _items(data, split)}, task
    kn = _data("knowledge")  # each fact is asked in the test with the one question template held out for it
    asked = [_knowledge_query(w) for w in _items(kn, kn.test[1])]
    assert len(set(asked)) == len(asked) == 60 * len(ATTRIBUTES)
    trained = Counter(_knowledge_query(w) for w in _items(kn, kn.train) if w[1] not in ("lives", "works",
                                                                                                "owns"))
    assert set(trained.values()) == {3} and set(trained) == set(asked)


def test_the_depths_of_each_split():
    kin, rules = _data("kinship"), _data("rules")
    assert set(kin.train.depth.tolist()) == {2, 3, 4} and sorted(kin.test) == list(range(2, 11))
    assert set(rules.train.depth.tolist()) == {0, 1, 2, 3} and sorted(rules.test) == list(range(6))
    for data in (kin, rules):
        for d, split in data.test.items():
            assert len(split) == 60 and bool((split.depth == d).all())
    assert Counter(kin.train.depth.tolist()) == {2: 100, 3: 100, 4: 100}


def test_the_vocabulary_covers_every_token():
    for task in SMALL:
        data = _data(task)
        assert data.vocab[0] == "<pad>" and len(set(data.vocab)) == len(data.vocab)
        for split in (data.train, *data.test.values()):
            t = split.tokens
            assert t.dtype == torch.long and int(t.min()) >= 0 and int(t.max()) < data.vocab_size
            n = (t != 0).sum(1)  # right padding only, one answer word, the last
            assert bool((t[torch.arange(t.shape[1]) < n[:, None]] != 0).all())
            assert bool((split.answer.sum(1) == 1).all())
            assert bool((split.answer.float().argmax(1) == n - 1).all())
        used = {int(x) for s in (data.train, *data.test.values()) for x in s.tokens.unique()}
        assert used - {0} <= set(range(1, data.vocab_size))


def test_the_labels_are_balanced():
    for task in ("kinship", "rules"):
        data = _data(task)
        for split in data.test.values():
            counts = Counter(split.tokens[split.answer].tolist())
            assert max(counts.values()) - min(counts.values()) <= 1, (task, counts)
        assert len(Counter(data.test[2].tokens[data.test[2].answer].tolist())) == (len(KIN) if task == "kinship"
                                                                                    else 2)
    kn = _data("knowledge")
    values = Counter(kn.test[1].tokens[kn.test[1].answer].tolist())
    assert len(values) == 24 and max(values.values()) - min(values.values()) <= 1


BAD = {
    "task": (dict(task="poetry"), "language.task"),
    "depth": (dict(task="kinship", test_depths=(2, 11)), "language.test_depths"),
    "rules depth": (dict(task="rules", train_depths=(6,)), "language.train_depths"),
    "names": (dict(task="kinship", n_names=5), "language.n_names"),
    "n_train": (dict(n_train=0), "language.n_train"),
    "unknown": (dict(n_people=3), "language: unknown field"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_configuration_gives_a_one_line_error(case):
    change, where = BAD[case]
    with pytest.raises(ValueError) as err:
        generate(LanguageConfig.from_dict({**LanguageConfig().to_dict(), **change}))
    assert str(err.value).startswith(where) and "\n" not in str(err.value), str(err.value)


def test_the_mixture_trains_on_both_kinds_and_tests_each_apart():
    """One training split of every knowledge item and the kinship stories (shuffled); the test splits by depth, depth 1
    the knowledge questions, 2-10 the kinship stories (``kinds``); the stories' names are none of the facts' people,
    and each kind's answers are its own solver's."""
    cfg = LanguageConfig(task="mixture", n_train=300, n_test=30, n_entities=40)
    data = generate(cfg)
    train = _items(data, data.train)
    stories = [w for w in train if "who" in w]
    facts = [w for w in train if "who" not in w]
    assert len(stories) == 300 and len(facts) == 40 * len(ATTRIBUTES) * 4
    assert cfg.kinds() == {"knowledge": (1,), "kinship": tuple(range(2, 11))} and set(data.test) == set(range(1, 11))
    people = set(names(40))
    story_names = {w for s in stories for w in s if w in NAME_POOL}
    assert story_names and not story_names & people
    assert any(_kin_solver(s)[0] == s[-1] for s in stories)
    assert all(_kin_solver(s) == (s[-1], len(s[: s.index("who")]) // 6) for s in stories)
    in_order = [s[8] == s[0] for s in stories]  # chain order: the second sentence goes on from the first's new person
    assert 0 < sum(in_order) < len(stories)  # shuffled: some stories are out of chain order
    for d in range(2, 11):
        assert all("who" in w and _kin_solver(w) == (w[-1], d) for w in _items(data, data.test[d]))
    stated = {(w[0], w[-1]) for w in facts if w[1] in ("lives", "works", "owns")}
    for w in _items(data, data.test[1]):
        person = next(x for x in w if x in people)
        assert "who" not in w and (person, w[-1]) in stated and tuple(w) not in {tuple(t) for t in train}
