"""Settings from prefixed environment variables, for every service.

pydantic-settings cannot be installed next to eth-brownie (it needs python-dotenv >= 0.21,
brownie pins 0.16), so each service's `Settings` is a plain pydantic model and this fills it:
field `x` comes from `<PREFIX>X`, with pydantic's parsing and validation. The environment is
passed in, so nothing here reads the process's state by itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def settings_from_env(model: type[M], prefix: str, environ: Mapping[str, str], **overrides: Any) -> M:
    values: dict[str, Any] = {}
    for name in model.model_fields:
        key = prefix + name.upper()
        if key in environ:
            values[name] = environ[key]
    values.update(overrides)
    return model.model_validate(values)
