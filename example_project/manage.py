#!/usr/bin/env python
"""Django's command-line utility for the example site.

Runs from anywhere (``python example_project/manage.py check`` from the repo
root, or ``./manage.py`` inside ``example_project/``): the repository root is
put on ``sys.path`` so that ``example_project.settings`` is importable.
"""

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
