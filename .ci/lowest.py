"""Print pip constraints pinning every runtime dependency to its lowest allowed version.

The lower bounds come from pyproject.toml (``name>=X`` becomes ``name==X``); a bound the
test extra raises (click>=8.2 for the test runner) wins, since the tests run there.
"""

import re
import tomllib
from pathlib import Path

project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
bounds: dict[str, str] = {}
for spec in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
    found = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", spec)
    if found:
        bounds[found.group(1).lower()] = found.group(2)
for spec in project["dependencies"]:
    name = re.split(r"[<>=!~ ]", spec, maxsplit=1)[0].lower()
    print(f"{name}=={bounds[name]}")
