"""The knobs' CLI options (pltlab.run.knobs): a command decorated with ``@knob_options(scope)``
gets one typer option per knob of that scope, in the registry's order, where its parameter
``knobs`` stands; it receives ``knobs`` = {option: value as the user wrote it} for the options
given (plus the scope's own defaults), ready for RunConfig.from_knobs, whose errors then name
the option (``invalid --rtt '-5ms': ...``)."""

from __future__ import annotations

import functools
import inspect
from typing import Annotated

import typer

from pltlab.run import knobs as registry

# The corpus option of the commands taking pages (run, calibrate, predict).
CorpusOpt = Annotated[str | None, typer.Option(help="Corpus directory to look page URLs up in.")]


def _param(k: registry.Knob, scope: str) -> inspect.Parameter:
    default = k.default_for(scope)
    if k.cli_type is bool:  # a flag: an on/off pair shows its default, a single flag is off unless given
        shown = {True: "on", False: "off"}.get(default) if "/" in k.option[-1] else None
    else:
        shown = None if default in (None, {}) else registry.show_value(default)
    info = typer.Option(*k.option, help=k.help, show_default=shown or False)
    return inspect.Parameter(
        k.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[k.cli_type | None, info]
    )


def knob_options(scope: str, only: tuple[str, ...] | None = None):
    ks = [k for k in registry.for_scope(scope) if only is None or k.name in only]

    def wrap(fn):
        sig = inspect.signature(fn)
        params = []
        for p in sig.parameters.values():
            if p.name == "knobs":
                params += [_param(k, scope) for k in ks]
            else:
                params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))

        @functools.wraps(fn)
        def command(**kwargs):
            given = {}
            for k in ks:
                v = kwargs.pop(k.name)
                v = k.cli(v) if k.cli and v is not None else v
                if v is None or v == []:
                    v = k.defaults.get(scope)  # the scope's own default, if it has one
                if v is not None:
                    given[k.flag] = v
            return fn(knobs=given, **kwargs)

        command.__signature__ = sig.replace(parameters=params)
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return wrap
