"""Prose that says more than the verdicts (issue 61): README.md and docs/*.md may not use words of certainty ("best",
"rules it out", "every setting", "no overthinking") about a question that no recorded verdict decides. The verdicts
are read from the recorded summaries, docs/results/<profile>/*.json; the generated blocks (<!-- x: start --> ...
<!-- x: end -->) are renderings of them and are not scanned."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from infiloop import paths
from infiloop.analysis import paper
from infiloop.experiments.report.verdicts import verdict

STRONG = re.compile(r"\b(?:is|are|was|were)\s+(?:still\s+)?the best\b|\bbest model\b"
                    r"|\b(?:FPRM|InfiLoop|carry-last|TRM) best\b|\brul(?:e|es|ed)\b(?:\s+[\w'’-]+){0,4}?\s+out\b"
                    r"|\bevery setting\b|\bin every\b|\bno overthinking\b|\bnever overthinks?\b", re.I)
GENERAL = re.compile(r"\bevery setting\b|\bin every\b", re.I)  # a statement about every setting: every profile counts
HEDGE = re.compile(r"\bnot decided\b|\bundecided\b|\bno claim\b", re.I)  # the sentence says the verdict itself
PROFILE = re.compile(r"`(quick|search|tiny|overthink|smoke|gpu|paper)`")

# What prose speaks about, the words that name it, and the claims whose recorded verdicts decide it ([]: none does).
TOPICS: dict[str, tuple[str, list[str]]] = {
    "which model is best": (r"\bbest model\b|\b(?:FPRM|InfiLoop|carry-last)\b[^.;|]{0,60}\bthe best\b"
                            r"|\b(?:FPRM|InfiLoop|carry-last) best\b", []),
    "overthinking": (r"overthink", ["overthink.carry_last_overthinks", "overthink.infiloop_keeps"]),
    "the paper's contrast": (r"\bcontrast\b|\bsolved puzzles\b|\bkeeps? (?:its|every|what)\b|\bafter its peak\b",
                             ["depth.carry_last_degrades", "diagnosis.carry_last_loses_after_solve",
                              "perturb.carry_last_loses", "overthink.carry_last_overthinks"]),
}


def recorded_verdicts(root: Path) -> dict[str, dict[str, str]]:
    """{profile: {claim id: verdict}} of every recorded summary under ``root`` (docs/results)."""
    out: dict[str, dict[str, str]] = {}
    for f in sorted(root.glob("*/*.json")):
        for c in json.loads(f.read_text(encoding="utf-8")).get("claims", []):
            out.setdefault(f.parent.name, {})[c["id"]] = verdict(c)
    return out


def units(text: str) -> list[tuple[str, str, str]]:
    """(sentence, its paragraph, the heading above it) of a markdown text, generated blocks left out; a table row is
    a sentence of its own."""
    text = re.sub(r"<!-- ([\w -]+): start -->.*?<!-- \1: end -->", "", text, flags=re.S)
    out, heading = [], ""
    for block in re.split(r"\n\s*\n", text):
        lines = block.strip().splitlines()
        if not lines:
            continue
        if lines[0].startswith("#"):
            heading, lines = lines[0], lines[1:]
        out += [(line, block, heading) for line in lines if line.startswith("|")]
        prose = "\n".join(line.strip() for line in lines if not line.startswith("|"))
        paragraph = " ".join(prose.split())
        for item in re.split(r"\n(?=[-*] |\d+\. )", prose):  # a list's items apart
            item = " ".join(item.split())
            out += [(s, paragraph, heading) for s in re.split(SENTENCE, item) if s]
    return out


SENTENCE = r'(?:(?<=[.!?])|(?<=[.!?]\*\*))\s+(?=[A-Z*`(\["])'  # a sentence's end, bold or not


def clause(sentence: str, at: int) -> str:
    """The clause of ``sentence`` around position ``at`` (between semicolons, colons or dashes)."""
    bounds = [0, *(m.end() for m in re.finditer(r"[;:]|\s[—–]\s", sentence)), len(sentence) + 1]
    i = max(k for k in range(len(bounds) - 1) if bounds[k] <= at)
    return sentence[bounds[i]:bounds[i + 1]]


def overreach(sentence: str, paragraph: str, heading: str, verdicts: dict[str, dict[str, str]]) -> list[str]:
    """Why ``sentence`` says more than the verdicts ([] when it does not): a word of certainty about a topic whose
    claims are not all decided (agrees or differs) in the recorded profiles it speaks of: those it names, else those
    its paragraph or heading names, where the topic's claims were recorded, else every profile that recorded them
    (always for "every setting"). A sentence passes that states the verdict ("not decided", "undecided", "no claim")
    in the clause of its word of certainty."""
    strong = STRONG.search(sentence)
    if not strong or HEDGE.search(clause(sentence, strong.start())):  # a verdict stated beside the word itself
        return []
    named = set(PROFILE.findall(sentence)) or set(PROFILE.findall(paragraph)) or set(PROFILE.findall(heading))
    why = []
    for topic, (words, ids) in TOPICS.items():
        if not re.search(words, sentence, re.I):
            continue
        if not ids:
            why.append(f"{strong.group(0)!r} about {topic}: no claim decides it")
        recorded = {p for p, v in verdicts.items() if set(ids) & set(v)}
        profiles = recorded if GENERAL.search(sentence) else (named & recorded) or recorded
        open_ = [f"{cid} at {p}: {verdicts[p][cid]}" for p in sorted(profiles) for cid in ids
                 if cid in verdicts[p] and verdicts[p][cid] not in ("agrees", "differs")]
        if open_:
            why.append(f"{strong.group(0)!r} about {topic}, not decided: {', '.join(open_)}")
    return why


VERDICTS = recorded_verdicts(paths.ROOT / "docs" / "results")
PAGES = [paths.ROOT / "README.md", *sorted((paths.ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_prose_says_more_than_the_recorded_verdicts(page):
    bad = [(s[:160], why) for s, para, head in units(page.read_text(encoding="utf-8"))
           if (why := overreach(s, para, head, VERDICTS))]
    assert not bad, f"{page.name}: words of certainty about what no recorded verdict decides: {bad}"


# The prose a statistics review found before issue 61 (README.md, docs/related-work.md, docs/results.md and
# docs/overthinking.md, as they read at 4a60ddd): each must be caught by the recorded verdicts, or the scan is blind.
BEFORE = [
    ("FPRM is the best model (90.5 %).", ""),
    ("The paper's central contrast does not appear, and the intervals rule it out: carry-last keeps its solved puzzles "
     "(0 of 503 lost at ε = 0) and does not fall after its peak, in every setting tried (`tiny`, `search` and 15 rows "
     "of the calibration search).", ""),
    ("FPRM, whose block is pre-norm with learned residual scales, is the best model at `search`: 91.5 %.", ""),
    ("**Agrees** in pattern: with the input re-injected, no overthinking; without it, a cost past the horizon.", ""),
    ("| Bansal et al. 2022 | many iterations can degenerate | abstract | input-injected reasoner: no overthinking | "
     "agrees in pattern |", ""),
    ("FPRM, with its pre-norm block, is still the best model by 16 points.", "## `search` with the learned connection"),
    ("- **Overthinking is there, in every model that learns.** FPRM without recall solves every 16-bit string.", ""),
]


@pytest.mark.parametrize("sentence, heading", BEFORE)
def test_the_scan_catches_the_prose_the_review_found(sentence, heading):
    assert overreach(sentence, sentence, heading, VERDICTS), sentence


def test_the_scan_reads_the_verdicts_and_the_profiles_named():
    """The same sentence passes where the claims it speaks of are decided at the profile it names, fails where they
    are not, and fails at every profile when it speaks of every setting; a sentence that states the verdict passes."""
    contrast = "At `search` the intervals rule the paper's contrast out."
    assert overreach(contrast, contrast, "", VERDICTS) == []  # decided (differs) at search
    assert overreach(contrast.replace("`search`", "`overthink`"), contrast, "", VERDICTS)  # undecided there
    assert overreach(contrast.replace(".", ", in every setting tried."), contrast, "", VERDICTS)
    planted = {"search": {"depth.carry_last_degrades": "undecided"}}
    assert overreach(contrast, contrast, "", planted)  # the verdict, not the wording, decides
    assert overreach("FPRM has the highest mean; which model is best is not decided.", "", "", VERDICTS) == []
    assert overreach("the best depth on validation", "", "", VERDICTS) == []  # certainty about nothing decided here


def test_a_count_of_the_claims_in_prose_is_the_code_s():
    """A number of claims said to be decided at once is len(paper.CLAIMS), or absent (docs/statistics.md said "About 22
    claims" where the code held 33); the generated blocks print intervals.multiplicity, which counts those shown."""
    stated = [(p.name, int(m.group(1))) for p in PAGES
              for m in re.finditer(r"\b(\d+) claims (?:are decided|of this companion)",
                                   re.sub(r"<!-- ([\w -]+): start -->.*?<!-- \1: end -->", "",
                                          p.read_text(encoding="utf-8"), flags=re.S))]
    assert all(n == len(paper.CLAIMS) for _, n in stated), stated
