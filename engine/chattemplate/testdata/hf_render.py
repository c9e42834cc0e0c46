"""Render chat-template cases the way transformers' apply_chat_template does.

Reads a JSON list of cases from stdin, each {"name", "template", "context"}, where context is the
object of template variables (messages, tools, add_generation_prompt, bos_token, ...), and writes a
JSON object {name: {"out": rendered} or {"error": message}} to stdout.

The environment copies transformers' (utils/chat_template_utils.py): an immutable sandbox with
trim_blocks and lstrip_blocks, the loopcontrols extension, a json.dumps tojson that keeps
non-ASCII and key order, raise_exception and strftime_now, and a {% generation %} tag that
renders its body (transformers' AssistantTracker also records the span for training masks).

Used by the Go tests when TFD_CHECK_WITH_PYTHON=1 to check their expected strings against Jinja2.
"""

import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body).set_lineno(lineno)


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

results = {}
for case in json.load(sys.stdin):
    try:
        results[case["name"]] = {"out": env.from_string(case["template"]).render(**case["context"])}
    except Exception as e:  # noqa: BLE001 - every failure is a result to compare
        results[case["name"]] = {"error": f"{type(e).__name__}: {e}"}
json.dump(results, sys.stdout, ensure_ascii=False, indent=1)
