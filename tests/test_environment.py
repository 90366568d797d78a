"""The setup stays honest: one list of pins, installed as pinned, and CI runs the README's command."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"unpinned requirement: {line!r} (everything is pinned exactly)"
            out[name.lower()] = version
    return out


def test_torch_and_executorch_are_pinned_to_the_known_good_pair():
    p = pins()
    assert p["torch"] == "2.13.0" and p["executorch"] == "1.5.1"


def test_the_zoo_transformers_is_pinned():
    # helpers.zoo builds its models with transformers; the measured verdicts (ViT's specialized image size)
    # belong to this version
    assert pins()["transformers"] == "5.24.0"


def test_environment_yml_is_the_conda_route_to_requirements_txt():
    text = (ROOT / "environment.yml").read_text()
    assert re.search(r"^\s*-\s*python=3\.11\s*$", text, re.M)
    assert re.search(r"^\s*-\s*pip\s*$", text, re.M)
    assert re.search(r"^\s*-\s*-r requirements\.txt\s*$", text, re.M)
    # no second list of pins: nothing else is installed by name
    packages = [m.group(1) for m in re.finditer(r"^\s*-\s*([A-Za-z][\w.-]*)\s*[=<>]", text, re.M)]
    assert packages == ["python"], f"environment.yml lists packages itself: {packages}"


def test_installed_versions_match_the_pins():
    for name, version in pins().items():
        installed = metadata.version(name)
        assert installed.split("+")[0] == version, f"{name}: installed {installed}, pinned {version}"


def test_the_installable_doctor_depends_on_the_same_pins():
    # pyproject's dependencies (what `pip install` of export-doctor pulls) are a subset of requirements.txt, pinned
    # the same: the doctor's import closure needs torch, executorch and numpy (tests/test_install.py runs it)
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = dict(re.fullmatch(r"([A-Za-z][\w.-]*)==(\S+)", d).groups() for d in project["dependencies"])
    assert set(declared) == {"torch", "executorch", "numpy"}
    assert declared == {name: pins()[name] for name in declared}
    assert project["scripts"] == {"export-doctor": "exportlab.doctor.cli:main"}


def test_no_bare_torch_anywhere():
    for path in (ROOT / "requirements.txt", ROOT / "pyproject.toml", ROOT / "environment.yml"):
        for line in path.read_text().splitlines():
            if re.match(r"^\s*[\"']?torch\s*[\"',]?\s*$", line) or re.match(r"^\s*torch\s*[<>~]", line):
                raise AssertionError(f"{path.name}: torch must be pinned exactly: {line!r}")


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert re.search(r"^make test\s*$", ci, re.M)


def test_generated_artifacts_are_ignored():
    ignored = (ROOT / ".gitignore").read_text()
    for pattern in ("*.pte", ".cache/", ".venv/", "test-output/"):
        assert pattern in ignored
