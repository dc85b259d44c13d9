"""Every ``python -m infiloop`` command that README.md and docs/*.md show, and every example of ``--help``, runs
as written.

The commands are read from the README's code blocks and inline code and from the examples printed by
``train --help`` and ``eval --help``; each runs in this process on the session's smoke run, with the run
root, the data root and the report root in a temporary folder. Placeholders are replaced: ``RUN`` and
``runs/sudoku/infiloop-tiny-<hash>`` by the smoke run's folder, ``my_puzzles.csv`` by a file of 4x4
puzzles, ``my_runs.tar`` by an export of the smoke run (the commands run in the temporary folder). A command
that takes minutes is marked ``slow`` (``pytest -m slow`` runs it) and one that needs torchrun, a GPU or the
hub is skipped, each with its reason; any other new command in the README runs by default.
"""

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from infiloop.cli import main
from infiloop.paths import ROOT

PREFIX = "python -m infiloop "

SLOW = {
    "python -m infiloop train --profile tiny --task sudoku --recipe infiloop":
        "trains the tiny model: 700 steps, minutes on a CPU",
    "python -m infiloop train --profile tiny --recipe infiloop --set model.outer.beta=0.1 --set train.steps=2000":
        "trains a tiny model for 2,000 steps",
    "python -m infiloop eval runs/sudoku/infiloop-tiny-<hash> --updates 960 --every 10":
        "960 outer updates take about a minute on 2 CPU cores even with the smoke model "
        "(`eval RUN --updates 48 --every 4` of `eval --help` runs the same form in the suite)",
    "python -m infiloop plan --profile tiny":
        "builds the tiny data and times 22 model shapes: minutes on 2 CPU cores (`plan --profile smoke --executor "
        "slurm` calibrates the same form in the suite)",
    "python -m infiloop plan --profile tiny --calibrate": "the same, measured again",
    # a real calibration of a profile's shapes on an empty cache takes one to two minutes here: the suite runs one,
    # `plan --profile smoke --executor slurm` (its shapes timed at its threads)
    "python -m infiloop plan": "builds the quick data and times its shapes, the slow-down beside other jobs and warm "
                               "workers: about two minutes on 2 CPU cores (`plan --profile smoke --executor slurm` "
                               "calibrates the same form in the suite)",
    "python -m infiloop plan --profile smoke": "times smoke's 46 evaluation and 17 training shapes, the slow-down and "
                                               "warm workers: about two minutes on 2 CPU cores (`plan --profile smoke "
                                               "--executor slurm` calibrates the same form in the suite)",
    "python -m infiloop plan --profile overthink": "times the overthinking study's 24 evaluation and 6 training "
                                                   "shapes: about two minutes on 2 CPU cores (`plan --profile smoke "
                                                   "--executor slurm` calibrates the same form in the suite)",
    "python -m infiloop plan --profile tiny -p seeds 0,1,2": "the same with three seeds (tests/test_plan.py plans "
                                                             "`-p seeds 0,1,2` at smoke in the suite)",
    **{f"python -m infiloop train --profile search --recipe {r} --set model.mixer=attention{more} --max-steps 600":
       "600 steps of the search model with attention (docs/calibration.md's diagnosis): minutes"
       for r, more in (("carry_last", ""), ("infiloop", ""), ("infiloop", " --set model.outer.name=carry_last"),
                       ("infiloop", " --set model.inner.name=carry_last"), ("infiloop", " --set train.decay=matrices"),
                       ("infiloop", " --set model.inner.content_score=false --set model.outer.content_score=false"),
                       ("infiloop", " --set model.inner.beta=0.1 --set model.outer.beta=0.1"),
                       ("carry_last", " --set model.inner.name=ema --set model.outer.name=ema"))},
    "python -m infiloop train --profile search --recipe carry_last --set train.seed=0":
        "trains seed 0's carry-last at search, 1,500 steps: about 9 minutes on one core (docs/results.md, \"The same "
        "seed on another CPU\")",
    "python -m infiloop plan --profile paper": "counts the memory of 44 model configurations: about 20 s on 2 CPU "
                                               "cores (tests/test_memory.py plans the paper profile's memory with "
                                               "-m slow, the gpu profile's in the suite)",
    "python -m infiloop notebook 02 -p profile tiny -p max_updates 480":
        "trains notebook 02's three tiny models: about 22 minutes (tests/test_notebooks.py runs the same command at "
        "smoke in the default suite)",
    "python -m infiloop notebook 02 -p retention_window 24":
        "runs notebook 02 at quick, training its models first (tests/test_notebooks.py runs the same command at "
        "smoke in the default suite)",
    "python -m infiloop plan --profile gpu --only 01 --tflops 200":
        "prices the gpu profile's notebook 01 as `plan --profile gpu --only 01 --only perturbation --tflops 100` does "
        "in the default suite",
    "python -m infiloop plan --profile gpu --gpu-memory 141": "prices the gpu profile's 70-odd jobs by their FLOPs and "
                                                              "counts their memory: about 17 s on 2 CPU cores "
                                                              "(tests/test_memory.py renders its memory section)",
    "python -m infiloop plan --profile smoke --executor slurm":
        "calibrates smoke's shapes (times them here): about 100 s on 2 CPU cores (tests/test_plan.py plans with an "
        "injected timer by default)",
    "python -m infiloop manifest --profile tiny": "builds the tiny data to resolve the runs (`manifest --profile "
                                                  "smoke 02 ...` runs the same form in the suite)",
}
SKIP = {"torchrun": "needs torchrun, several processes and CUDA devices",
        "python -m infiloop pilot --profile gpu": "trains the gpu model for ten minutes on the hub's data (the same "
                                                  "command at smoke runs in the suite, tests/test_pilot.py too)",
        "python -m infiloop plan --profile gpu --device cuda": "needs a CUDA device",
        "python -m infiloop plan --profile paper --executor slurm": "builds the paper profile's data from the hub "
                                                                   "(`plan --profile smoke --executor slurm` runs "
                                                                   "the same form in the suite)",
        "python -m infiloop runs pull": "needs the Hugging Face hub (tests/test_runs.py pulls from a local hub cache "
                                        "offline)",
        "python -m infiloop contrasts ROW": "trains a row of the contrast search (tests/test_calibration.py runs rows "
                                             "at smoke)",
        "python -m infiloop results --fingerprints --record-fingerprints":
            "writes docs/results/fingerprints.json and trains quick's three models (tests/test_numeric.py records a "
            "family into a temporary file)",
        "python -m infiloop results": "rewrites the README's results block (tests/test_results.py checks that it is "
                                      "current)",
        "python -m infiloop connection-study --render": "rewrites docs/connection-study.md's table "
                                                       "(tests/test_connection_study.py checks that it is current)",
        "python -m infiloop connection-study --figure": "redraws docs/connection-study-dynamics.png from the "
                                                       "recorded results",
        "python -m infiloop contrasts --render":
            "rewrites docs/calibration.md's table and docs/results.md's block (tests/test_study.py and "
            "tests/test_calibration.py check that both are current)"}


# Commands that a prefix of SKIP would skip but that write only into the test's folders: they run.
RUN_ANYWAY = {"python -m infiloop results --fingerprints smoke"}  # trains the four smoke models (about 10 s)

# Commands whose exit status 1 is a measured verdict that they print as their last line, not an error: the pilot's
# no-go depends on how many steps its few seconds of training reach, which a busy machine lowers.
VERDICTS = {"python -m infiloop pilot": "no-go"}


def _code_lines(text: str) -> list[str]:
    """The lines of the fenced and indented code blocks of a Markdown text."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            lines.append(line.strip())
    return lines


def readme_commands() -> list[str]:
    """Every ``python -m infiloop`` (or torchrun) command of README.md and of the pages of docs/, without its
    trailing comment."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    found = [re.sub(r"\s+#.*$", "", ln) for ln in _code_lines(text)
             if ln.startswith(PREFIX) or (ln.startswith("torchrun") and "-m infiloop" in ln)]
    found += [" ".join(m.group(1).split()) for m in re.finditer(r"`(python -m infiloop [^`]*)`", text)]
    return list(dict.fromkeys(found))


def help_examples() -> list[str]:
    """The example commands printed by ``train --help`` and ``eval --help``."""
    found = []
    for command in ("train", "eval"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main([command, "--help"])
        found += [ln.strip() for ln in out.getvalue().splitlines() if ln.strip().startswith(PREFIX)]
    return found


# The slow commands that CI's slow step runs (each within about two minutes); the others are `long` (minutes to tens of
# minutes each), run on purpose with `-m long`.
IN_CI = ("python -m infiloop plan --profile smoke --executor slurm",
         "python -m infiloop plan --profile gpu --only 01 --tflops 200",
         "python -m infiloop plan --profile paper",
         "python -m infiloop plan --profile gpu --gpu-memory 141",
         "python -m infiloop eval runs/sudoku/infiloop-tiny-<hash> --updates 960 --every 10")


def _param(cmd: str):
    if cmd in SLOW:
        marks = [pytest.mark.slow] if cmd in IN_CI else [pytest.mark.slow, pytest.mark.long]
        return pytest.param(cmd, marks=marks, id=cmd)
    return pytest.param(cmd, id=cmd)


def test_the_readme_and_help_show_commands():
    readme, examples = readme_commands(), help_examples()
    assert len(readme) >= 8 and any("--perturb-at" in c for c in readme)
    assert any("train.lr=3e-4" in c for c in examples) and any("--perturb-at" in c for c in examples)
    assert not set(SLOW) - set(readme), "a command marked slow is no longer in the README: update SLOW"


@pytest.fixture
def roots(tmp_path, monkeypatch):
    """Run, data and report roots in a temporary folder, for commands that write."""
    from infiloop import paths

    for name in ("RUNS", "DATA", "RESULTS", "FIGURES"):
        monkeypatch.setattr(paths, name, tmp_path / name.lower())
    monkeypatch.chdir(tmp_path)  # a relative output (`runs export ... -o my_runs.tar`) lands here
    return tmp_path


def _arguments(cmd: str, run_dir: Path, puzzles: Path) -> list[str]:
    cmd = cmd.replace("runs/sudoku/infiloop-tiny-<hash>", str(run_dir))
    args = [str(run_dir) if a == "RUN" else str(puzzles) if a == "my_puzzles.csv" else a
            for a in shlex.split(cmd[len(PREFIX):])]
    unknown = [a for a in args if "<" in a or a.isupper()]
    assert not unknown, f"{cmd}: placeholder(s) {unknown} this test does not replace; add them to _arguments"
    return args


@pytest.mark.parametrize("cmd", [_param(c) for c in dict.fromkeys(readme_commands() + help_examples())])
def test_documented_command_runs_as_written(cmd, smoke_run, roots, capsys):
    for prefix, reason in SKIP.items():
        if cmd.startswith(prefix) and cmd not in RUN_ANYWAY:
            pytest.skip(reason)
    from infiloop.tasks import sudoku

    puzzles = roots / "my_puzzles.csv"
    sudoku.write_csv(puzzles, sudoku.generate(12, sudoku.geometry(4, None), (6, 9), seed=7, progress=False))
    if "my_runs.tar" in cmd:  # what `runs export RUN -o my_runs.tar` writes, for `runs import my_runs.tar`
        from infiloop.experiments.store.archives import export_runs

        export_runs([smoke_run.dir], roots / "my_runs.tar")
    status = main(_arguments(cmd, smoke_run.dir, puzzles))
    out = capsys.readouterr()
    verdict = next((v for prefix, v in VERDICTS.items() if cmd.startswith(prefix)), None)
    if verdict is not None and status == 1:  # a measured verdict, not an error: it must say so
        assert out.out.strip().splitlines()[-1] == verdict, out.out[-2000:]
        status = 0
    assert status == 0 and "error:" not in out.err and "Traceback" not in out.err, out.err[-3000:]
    assert out.out.strip(), "the command printed nothing"


def test_the_readme_names_the_environment_before_its_first_command():
    """A newcomer reads ``source .venv/bin/activate`` (the environment ``./reproduce.sh`` builds) before the README's
    first bare ``python -m infiloop`` or ``papermill`` command, which fails outside it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    bare = re.compile(r"^\s*(python -m infiloop|papermill) |`(python -m infiloop|papermill) ", re.M)
    first = bare.search(text)
    assert first is not None, "the README shows no python -m infiloop or papermill command"
    assert "source .venv/bin/activate" in text[:first.start()], text[max(0, first.start() - 600):first.end()]


def test_every_readme_papermill_line_says_what_it_costs():
    """papermill runs a notebook in one process: a line that trains says so and how long it takes, beside a fast one
    that reads the default run's cache."""
    lines = [ln for ln in _code_lines((ROOT / "README.md").read_text(encoding="utf-8")) if ln.startswith("papermill ")]
    assert len(lines) >= 2
    for ln in lines:
        cost = ln.partition("#")[2]
        assert re.search(r"\d+ (s|min|seconds|minutes?)\b|under a minute", cost), f"no time given: {ln}"
    assert "cache" in lines[0].partition("#")[2] and "-p profile" not in lines[0], lines[0]
