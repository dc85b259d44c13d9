"""CITATION.cff follows the Citation File Format 1.2.0 in every key it uses (the rules of the format's schema for
those keys, checked here because the format's own validator, cffconvert, pins a jsonschema older than Jupyter's),
names the paper as the preferred citation, and the README says how to cite."""

import re

import yaml

from infiloop.paths import ROOT

CFF = ROOT / "CITATION.cff"
# The keys the format allows at the top level and in a reference (schema 1.2.0, "definitions.reference"), the types it
# allows and the patterns it checks, for the keys used here.
TOP = {"abstract", "authors", "cff-version", "commit", "contact", "date-released", "doi", "identifiers", "keywords",
       "license", "license-url", "message", "preferred-citation", "references", "repository", "repository-artifact",
       "repository-code", "title", "type", "url", "version"}
REFERENCE_REQUIRED = {"authors", "title", "type"}
REFERENCE_TYPES = {"art", "article", "audiovisual", "bill", "blog", "book", "catalogue", "conference-paper",
                   "conference", "data", "database", "dictionary", "edited-work", "encyclopedia", "film-broadcast",
                   "generic", "government-document", "grant", "hearing", "historical-work", "legal-case",
                   "legal-rule", "magazine-article", "manual", "map", "multimedia", "music", "newspaper-article",
                   "pamphlet", "patent", "personal-communication", "proceedings", "report", "serial", "slides",
                   "software", "software-code", "software-container", "software-executable", "software-virtual-machine",
                   "sound-recording", "standard", "statute", "thesis", "unpublished", "video", "website"}
URL = re.compile(r"^(https|http|ftp|sftp)://.+")
PERSON_KEYS = {"family-names", "given-names", "name-particle", "name-suffix", "affiliation", "email", "orcid",
               "website", "alias"}
ENTITY_KEYS = {"name", "address", "city", "country", "email", "website", "orcid", "alias"}


def _check_authors(authors, where):
    assert isinstance(authors, list) and authors, f"{where}: authors must be a non-empty list"
    for a in authors:
        keys = set(a)
        assert "name" in keys or "family-names" in keys or "given-names" in keys, f"{where}: {a} names no one"
        assert keys <= (ENTITY_KEYS if "name" in keys else PERSON_KEYS), f"{where}: unknown keys {keys}"
        assert all(isinstance(v, str) and v.strip() for v in a.values()), f"{where}: empty or non-text value in {a}"


def _check_reference(ref, where):
    assert REFERENCE_REQUIRED <= set(ref), f"{where}: needs {sorted(REFERENCE_REQUIRED - set(ref))}"
    assert ref["type"] in REFERENCE_TYPES, f"{where}: type {ref['type']!r} is not one of the format's"
    _check_authors(ref["authors"], where)
    for key in ("url", "repository-code"):
        if key in ref:
            assert URL.match(ref[key]), f"{where}: {key} is not a URL"
    if "year" in ref:
        assert isinstance(ref["year"], int), f"{where}: year must be an integer"


def test_citation_file_follows_the_format():
    cff = yaml.safe_load(CFF.read_text(encoding="utf-8"))
    assert set(cff) <= TOP, f"unknown top-level keys: {set(cff) - TOP}"
    assert cff["cff-version"] == "1.2.0"
    assert {"message", "title", "authors"} <= set(cff)
    assert cff.get("type", "software") in {"software", "dataset"}
    _check_authors(cff["authors"], "authors")
    assert isinstance(cff["version"], str) and isinstance(cff["keywords"], list)
    for i, ref in enumerate(cff.get("references", [])):
        _check_reference(ref, f"references[{i}]")
    _check_reference(cff["preferred-citation"], "preferred-citation")


def test_the_paper_is_the_preferred_citation_and_the_readme_says_how_to_cite():
    import tomllib

    from infiloop.analysis import paper

    cff = yaml.safe_load(CFF.read_text(encoding="utf-8"))
    pref = cff["preferred-citation"]
    doc = " ".join(paper.__doc__.split())
    assert pref["title"] in doc and "2610.11570" in pref["url"] and "2610.11570" in doc
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cff["version"] == project["version"] and cff["license"] == project["license"]  # an SPDX string
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "CITATION.cff" in readme


def test_a_broken_file_is_caught():
    import pytest

    with pytest.raises(AssertionError, match="type"):
        _check_reference({"type": "paper", "title": "x", "authors": [{"name": "y"}]}, "ref")
    with pytest.raises(AssertionError, match="names no one"):
        _check_authors([{"affiliation": "somewhere"}], "authors")
    with pytest.raises(AssertionError, match="not a URL"):
        _check_reference({"type": "article", "title": "x", "authors": [{"name": "y"}], "url": "arxiv 2610"}, "ref")
