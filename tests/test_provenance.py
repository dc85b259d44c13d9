"""Provenance of the report on a GPU box, checked on the CPU: CUDA build, GPU name and count, driver
("none" where absent; faked where present), and the list of installed packages written beside the report."""

import os
import stat
from importlib import metadata

import torch

from infiloop.experiments.report import build as report
from infiloop.experiments.report import provenance


def _fake_nvidia_smi(folder, out):
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\n[ \"$1\" = --query-gpu=driver_version ] && printf '{out}' && exit 0\nexit 3\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def test_cuda_provenance_on_this_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no nvidia-smi
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # and torch sees no GPU either (on a GPU box)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    info = provenance.cuda_provenance(tmp_path)
    assert info["cuda device"] == "none" and info["nvidia driver"] == "none"
    assert info["cuda"] == (torch.version.cuda or "none (a CPU build of torch)")


def test_cuda_provenance_with_gpus(tmp_path, monkeypatch):
    _fake_nvidia_smi(tmp_path / "bin", "570.86.15\\n570.86.15\\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "NVIDIA H200")
    monkeypatch.setattr(torch.version, "cuda", "12.9")
    info = provenance.cuda_provenance(tmp_path)
    assert info == {"cuda": "12.9", "cuda device": "NVIDIA H200 × 2", "nvidia driver": "570.86.15"}


def test_report_writes_and_links_the_package_list(tmp_path):
    out = report.build_report("tiny", root=tmp_path)
    packages = out.parent / "packages.txt"
    lines = [ln for ln in packages.read_text().splitlines() if not ln.startswith("#")]
    assert f"torch=={metadata.version('torch')}" in lines and f"numpy=={metadata.version('numpy')}" in lines
    assert len(lines) == len(set(lines)) == len(provenance.installed_packages()) > 20
    text = out.read_text(encoding="utf-8")
    prov = text[text.index('id="provenance"'):]
    assert f'<th>installed packages</th><td>{len(lines)} (<a href="packages.txt">packages.txt</a>' in prov
    for key in ("cuda", "cuda device", "nvidia driver"):
        assert f"<th>{key}</th>" in prov
