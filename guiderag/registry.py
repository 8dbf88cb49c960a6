"""How a setting is declared, read, checked and shown: the machinery of the settings registry.

Every setting is one field of a stage's frozen config (guiderag/scopes.py) declared with
`setting(default, help, ...)`: its name is the field's, its type the field's annotation,
its stage the config's. That declaration is the single source: `Settings.load` reads the
environment and the CLI flags through it, `guiderag config` lists it, the CLI's flags
take their help from it and docs/settings.md is generated from it (a test keeps the file
in step). Modelled on datasette's settings.

Environment variables are GUIDERAG_<NAME>, except the OpenAI ones, which keep their
standard names (OPENAI_API_KEY, OPENAI_BASE_URL); an alias (GUIDERAG_MODEL sets both
model names) is read when the setting's own variable is unset. An empty variable counts
as unset.
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar, Union

from .errors import InputError
from .redact import redact

T = TypeVar("T")

# Where a value came from (`guiderag config`, and the error naming it).
DEFAULT, ENVIRONMENT, FLAG = "default", "environment", "flag"
# The stages a setting belongs to, in pipeline order; each is one frozen config.
STAGES = ("store", "scraper", "retrieval", "answer", "model", "api", "chat", "eval", "cli")
MASK = "***"
_META = "guiderag.setting"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Check:
    """A rule a value must satisfy: `test(value)`, and what the error says the value must be."""

    test: Callable[[Any], bool]
    must: str  # completes "must be ...": "between 0 and 1"


def between(lo: float, hi: float) -> Check:
    return Check(lambda v: lo <= v <= hi, f"between {lo:g} and {hi:g}")


def at_least(lo: float) -> Check:
    return Check(lambda v: v >= lo, f"at least {lo:g}")


def above(lo: float) -> Check:
    return Check(lambda v: v > lo, f"more than {lo:g}")


def one_of(choices: Iterable[str]) -> Check:
    allowed = tuple(choices)
    return Check(lambda v: v in allowed, "one of " + ", ".join(allowed))


NOT_EMPTY = Check(lambda v: bool(str(v).strip()), "a non-empty text")


@dataclass(frozen=True)
class Spec:
    """What the declaration says beyond the field's name, type and default."""

    help: str
    env: str | None = None  # default: GUIDERAG_<NAME>
    flag: str | None = None  # the CLI flag that sets it ("--threshold"), if any
    flag_help: bool = True  # the flag maps one to one: its help is this setting's
    secret: bool = False  # never shown, only whether it is set
    checks: tuple[Check, ...] = ()
    aliases: tuple[str, ...] = ()  # environment variables read when `env` is unset
    default_doc: str | None = None  # how docs show a default computed per machine


def setting(default: T, help: str, *, env: str | None = None, flag: str | None = None, flag_help: bool = True,
            secret: bool = False, check: Check | tuple[Check, ...] = (), aliases: tuple[str, ...] = (),
            factory: Callable[[], T] | None = None, default_doc: str | None = None) -> T:
    """Declare one setting as a dataclass field of a stage's config (typed as its value, so
    mypy sees `threshold: float = setting(0.2, ...)` as a float field). `factory`
    computes the default per process (the default store's path)."""
    spec = Spec(help=help, env=env, flag=flag, flag_help=flag_help, secret=secret,
                checks=check if isinstance(check, tuple) else (check,), aliases=aliases, default_doc=default_doc)
    if factory is not None:
        return field(default_factory=factory, metadata={_META: spec})
    return field(default=default, metadata={_META: spec})


@dataclass(frozen=True)
class Setting:
    """One registered setting: everything `Settings.load`, `guiderag config` and the docs need."""

    name: str
    stage: str
    kind: type  # str, int, float, bool or Path
    optional: bool  # None is a value (unset)
    spec: Spec
    _default: Any = field(repr=False)  # the value, or a factory (dataclasses.MISSING when none)
    _factory: Callable[[], Any] | None = field(default=None, repr=False)

    @property
    def help(self) -> str:
        return self.spec.help

    @property
    def env(self) -> str:
        return self.spec.env or "GUIDERAG_" + self.name.upper()

    @property
    def flag(self) -> str | None:
        return self.spec.flag

    @property
    def secret(self) -> bool:
        return self.spec.secret

    @property
    def default(self) -> Any:
        return self._factory() if self._factory is not None else self._default

    @property
    def type_name(self) -> str:
        name = {str: "text", int: "integer", float: "number", bool: "boolean", Path: "path"}[self.kind]
        return name + (" (optional)" if self.optional else "")

    # -- reading ------------------------------------------------------------------
    def in_code(self) -> str:
        """How messages name a value set in code: the setting and its variable."""
        return f"the setting {self.name} ({self.env})"

    def from_env(self, env: typing.Mapping[str, str]) -> tuple[bool, Any, str]:
        """(found, value, the variable it came from) from an environment."""
        for key in (self.env, *self.spec.aliases):
            raw = env.get(key)
            if raw is not None and raw != "":
                return True, self.parse(raw, f"environment variable {key}"), key
        return False, None, ""

    def parse(self, raw: str, where: str) -> Any:
        """The value a text (an environment variable, a flag) spells, else InputError
        naming `where` ("environment variable GUIDERAG_THRESHOLD", "--threshold")."""
        text = raw.strip()
        if self.kind is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise InputError(f"{where} must be one of {', '.join(_TRUE)} or {', '.join(_FALSE)}, "
                             f"not {self.shown_raw(raw)}")
        if self.kind in (int, float):
            try:
                number = int(text) if self.kind is int else float(text)
            except ValueError:
                kind = "a whole number" if self.kind is int else "a number"
                raise InputError(f"{where} must be {kind}, not {self.shown_raw(raw)}") from None
            if isinstance(number, float) and not math.isfinite(number):
                raise InputError(f"{where} must be a finite number, not {self.shown_raw(raw)}")
            return number
        if self.kind is Path:
            return raw if self.name == "db" else Path(raw)  # db may be a postgresql:// URL
        return raw

    def coerce(self, value: Any, where: str) -> Any:
        """A value given in code or by argparse, as this setting's type (text is parsed)."""
        if value is None or isinstance(value, self.kind) and not (self.kind is int and isinstance(value, bool)):
            return value
        if isinstance(value, str):
            return self.parse(value, where)
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        raise InputError(f"{where} must be {self.type_name}, not {self.shown(value)}")

    def check(self, value: Any, where: str) -> None:
        """InputError naming `where` when the value breaks one of the declared rules."""
        if value is None:
            if not self.optional:
                raise InputError(f"{where} must be set")
            return
        for rule in self.spec.checks:
            if not rule.test(value):
                raise InputError(f"{where} must be {rule.must}, not {self.shown(value)}")

    # -- showing ------------------------------------------------------------------
    def shown(self, value: Any) -> str:
        """The value as messages and `guiderag config` print it: secrets masked, URLs'
        passwords removed."""
        if value is None:
            return "(not set)"
        if self.secret:
            return MASK
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, float):
            return f"{value:g}"
        text = redact(str(value))
        # a newline or another control character is shown escaped: the message stays one line
        return text if text.isprintable() else repr(text)

    def shown_raw(self, raw: str) -> str:
        return MASK if self.secret else repr(redact(raw))

    def json_value(self, value: Any) -> Any:
        """The value for `guiderag config --json`: JSON types, secrets masked."""
        if value is None:
            return None
        if self.secret:
            return MASK
        if isinstance(value, (bool, int, float)):
            return value
        return redact(str(value))

    def default_text(self) -> str:
        """The default as the docs write it (machine-independent)."""
        if self.spec.default_doc is not None:
            return self.spec.default_doc
        value = self.default
        if value is None:
            return "(not set)"
        if isinstance(value, str) and not value:
            return "(empty)"
        return self.shown(value)


def _kind(annotation: Any) -> tuple[type, bool]:
    """(value type, optional) of a field annotation such as `float` or `Path | None`."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"a setting has one type, not {annotation}")
        return _kind(args[0])[0], True
    if annotation not in (str, int, float, bool, Path):
        raise TypeError(f"a setting is text, a number, a boolean or a path, not {annotation}")
    return annotation, False


def settings_of(config: type, stage: str) -> list[Setting]:
    """The settings a stage's config declares (fields without `setting()` are derived, not settings)."""
    hints = typing.get_type_hints(config)
    out = []
    for f in dataclasses.fields(config):
        spec = f.metadata.get(_META)
        if spec is None:
            continue
        kind, optional = _kind(hints[f.name])
        factory = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        out.append(Setting(f.name, stage, kind, optional, spec, f.default, factory))
    return out
