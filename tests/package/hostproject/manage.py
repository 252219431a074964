#!/usr/bin/env python
"""A minimal host project that installs `messaging` from its wheel (tests/package/test_wheel.py)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
