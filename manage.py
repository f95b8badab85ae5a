#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")
    from hitl_project import telemetry

    # Before Django loads the apps, which creates the metrics: whether this command writes them.
    telemetry.command(sys.argv[1] if len(sys.argv) > 1 else "")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
