"""How a setting is declared and read: one environment variable per field, refused in one line when invalid."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import AliasChoices, Field, ValidationError, model_validator
from pydantic.json_schema import JsonDict
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGE_DIR = Path(__file__).resolve().parent.parent


def project_root() -> Path:
    """The checkout this package runs from, or the working directory when installed elsewhere."""
    checkout = PACKAGE_DIR.parent
    return checkout if (checkout / "pyproject.toml").exists() else Path.cwd()


class SettingsError(ValueError):
    """A setting's value is not allowed: names the variable, the value and what is allowed."""


class Settings(BaseSettings):
    """One concern's settings, read from the environment when made (never at import)."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _empty_is_unset(cls, values: Any) -> Any:
        """An empty variable means its default, except where the table says empty means something (`keeps_empty`)."""
        if not isinstance(values, dict):
            return values
        keep = {
            variable
            for name, info in cls.model_fields.items()
            if keeps_empty(info)
            for variable in variables(cls, name)
        }
        return {key: value for key, value in values.items() if value != "" or key in keep}


def setting(
    variable: str | tuple[str, ...],
    default: Any = None,
    *,
    doc: str,
    shown: str | None = None,
    secret: bool = False,
    keeps_empty: bool = False,
    default_factory: Callable[..., Any] | None = None,
    **constraints: Any,
) -> Any:
    """A field read from `variable` (or the first of several that is set), described once for the UI and the docs.

    `shown` is the default as the configuration table says it, when the value alone would not explain it;
    `secret` values reach Dagster resources as dg.EnvVar, never as values.
    """
    alias = AliasChoices(*variable) if isinstance(variable, tuple) else variable
    extra: JsonDict = {"shown": shown, "secret": secret, "keeps_empty": keeps_empty}
    if default_factory is not None:
        return Field(
            default_factory=default_factory,
            validation_alias=alias,
            description=doc,
            json_schema_extra=extra,
            **constraints,
        )
    return Field(default, validation_alias=alias, description=doc, json_schema_extra=extra, **constraints)


def _extra(info: Any) -> dict[str, Any]:
    extra = info.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def keeps_empty(info: Any) -> bool:
    return bool(_extra(info).get("keeps_empty"))


def is_secret(info: Any) -> bool:
    return bool(_extra(info).get("secret"))


def shown_default(info: Any) -> str | None:
    shown = _extra(info).get("shown")
    return shown if isinstance(shown, str) else None


def variables(model: type[Settings], name: str) -> tuple[str, ...]:
    """The environment variables a field is read from, in order of precedence."""
    alias = model.model_fields[name].validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(choice) for choice in alias.choices)
    return (str(alias),)


def variable_set(model: type[Settings], name: str) -> str | None:
    """The variable a field's value came from, or None when it has its default."""
    return next((variable for variable in variables(model, name) if os.environ.get(variable)), None)


SettingsT = TypeVar("SettingsT", bound=Settings)


def load(model: type[SettingsT]) -> SettingsT:
    """The model read from the environment now; a bad value is one line naming the variable, value and rule.

    Made once per distinct value of its variables (pydantic-settings takes milliseconds to read the environment,
    and a source file's records ask for their limits each), so a changed variable is still read at once.
    """
    return _loaded(model, tuple(os.environ.get(variable) for variable in _all_variables(model)), os.getcwd())


@functools.cache
def _all_variables(model: type[Settings]) -> tuple[str, ...]:
    return tuple(variable for name in model.model_fields for variable in variables(model, name))


@functools.lru_cache(maxsize=256)
def _loaded(model: type[SettingsT], values: tuple[str | None, ...], cwd: str) -> SettingsT:
    """`values` and `cwd` are the cache key: what the model is read from (cwd: a default outside a checkout)."""
    try:
        return model()
    except ValidationError as error:
        problem = error.errors()[0]
        variable = ".".join(str(part) for part in problem["loc"]) or model.__name__
        rule = problem["msg"][:1].lower() + problem["msg"][1:]
        rule = rule.removeprefix("value error, ")
        raise SettingsError(f"environment variable {variable} is {problem['input']!r}; {rule}") from None


def default(model: type[Settings], name: str) -> Any:
    """A field's declared default, for code outside the settings that needs the same value (never a copy of it)."""
    return model.model_fields[name].default


def as_resource_field(model: type[Settings], name: str, **override: Any) -> Any:
    """A Dagster resource field declared from a setting: its default, description and bounds, not a copy of them.

    `override` sets what a resource holds differently (a default computed from other settings, or '' for "derived").
    """
    info = model.model_fields[name]
    bounds = {
        key: getattr(rule, key)
        for rule in info.metadata
        for key in ("ge", "gt", "le", "lt", "min_length")
        if getattr(rule, key, None) is not None
    }
    values = {"default": info.default, "description": info.description, **bounds, **override}
    return Field(**values)
