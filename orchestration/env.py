"""Reading settings from the environment, one rule for every stage (the variables: topicmap/settings.py)."""

import dagster as dg

from topicmap.settings import Setting


def env_or(setting: Setting, default: str) -> str | dg.EnvVar:
    """An EnvVar when the variable is set (its value is read at run time and never shown), else ``default``.

    Secrets use this too, with an empty default: a deployment without, say, Facebook credentials still
    loads and runs every other stage, and the stage that needs them says clearly what is missing."""
    return dg.EnvVar(setting.name) if setting.is_set() else default
