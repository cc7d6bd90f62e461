// Small Jinja templates, one construct each, that the reference engine renders (or refuses) for
// lockstep's interpreter tests: [template, context].
'use strict';

const msgs = [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }];

const snippets = [
  // output, literals, printing of values
  ['{{ "x" }}{{ 1 }}{{ 2.0 }}{{ 2.5 }}{{ -0.0 }}{{ true }}{{ none }}{{ undefined_name }}', {}],
  ['{{ [1, "a", none, true, 2.5] }}|{{ {"k": [1, {"z": null}]} }}', {}],
  ['{{ 1e3 }}', {}],
  ['{{ 1000 if false else 10 / 4 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}', {}],
  ['{{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 100000000000000000000000 * 10 }} {{ 0.000001 / 10 }}', {}],
  ['{{ x }} {{ y }} {{ z }}', { x: 1.5, y: 3, z: 12345678901 }],
  ['{{ "a" ~ 1 ~ 2.0 ~ true }} {{ "n:" + 3 }} {{ [1, 2] + [3] }} {{ "s" + [1, "x"] }}', {}],
  ['{{ \'single\' "double" }} {{ "esc\\n\\t\\\\ \\"q\\" \\x41\\u00e9" }}', {}],
  // whitespace control, comments, lstrip/trim blocks
  ['  {%- if true -%}  A  {%- endif -%}  |{# c #}|{#- strip -#}  |', {}],
  ['line\n    {% if true %}\n    inner\n    {% endif %}\nend\n', {}],
  ['a  {{- "b" -}}  c {{ "d" }} \n{# comment #}\ne', {}],
  ['{% for i in [1,2] %}\n  item{{ i }}\n{% endfor %}\n', {}],
  // if / elif / else, truthiness
  ['{% for v in [0, 1, "", "x", [], [0], {}, {"a":1}, none] %}{% if v %}T{% else %}F{% endif %}{% endfor %}', {}],
  ['{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three{% else %}many{% endif %}', { x: 3 }],
  ['{% if not a and b or c %}yes{% endif %}{% if a is defined %}def{% endif %}', { b: 1, c: 0 }],
  // for loops: loop.*, else, filters, unpacking, break/continue
  ['{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ m.role }};{% endfor %}', { messages: msgs }],
  ['{% for x in [] %}never{% else %}empty{% endfor %}', {}],
  ['{% for k, v in {"b": 1, "a": 2} | items %}{{ k }}={{ v }},{% endfor %}', {}],
  ['{% for k in {"b": 1, "a": 2} %}{{ k }}{% endfor %}', {}],
  ['{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.index }}{% endfor %}', {}],
  ['{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}', {}],
  ['{% for x in [1] %}a{% break %}{% else %}E{% endfor %}', {}],
  ['{% for x in [1, 2] %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}', {}],
  ['{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}', {}],
  ['{% for x in "abc" %}{{ x }}{% endfor %}', {}],
  // set, namespace, scoping, block set
  ['{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}', {}],
  ['{% set ns = namespace(total=0, names="") %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }} {{ ns }}', {}],
  ['{% set a, b = [1, 2] %}{{ b }}{{ a }}{% set s %}block {{ a }}{% endset %}[{{ s }}]', {}],
  ['{% set d = {"k": 1} %}{% set d.k = 2 %}', {}],
  // macros: defaults, keyword args, recursion, caller, dynamic scope
  ['{% macro greet(name, punct="!") %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet("A") }} {{ greet("B", punct="?") }} {{ greet(punct=".", name="C") }}', {}],
  ['{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}{% endmacro %}{{ fact(5) }}', {}],
  ['{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inside{% endcall %}', {}],
  ['{% macro m() %}{{ outer }}{% endmacro %}{% set outer = "seen" %}{{ m() }}', {}],
  ['{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}', {}],
  // filters
  ['{{ "  Hi There  " | trim }}|{{ "abc" | upper }}|{{ "ABC" | lower }}|{{ "hello world" | title }}|{{ "hello" | capitalize }}', {}],
  ['{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ["b", "A", "c"] | sort }} {{ [1, 2, 3] | reverse }}', {}],
  ['{{ [1, 2, 3] | length }} {{ "héllo" | length }} {{ {"a": 1} | length }} {{ [1, 2] | first }} {{ [1, 2] | last }}', {}],
  ['{{ ["a", "b"] | join(", ") }} {{ [1, none, 2.5] | join("-") }} {{ "abc" | join("|") }}', {}],
  ['{{ x | default("d") }} {{ none | default("d") }} {{ "" | default("d", true) }} {{ 0 | default(5) }}', {}],
  ['{{ {"b": 2, "A": 1, "c": 3} | dictsort }} {{ {"b": 2, "a": 1} | dictsort(by="value", reverse=true) }}', {}],
  ['{{ [1, 2] | tojson }} {{ {"a": "x\\ny", "b": [true, none]} | tojson }} {{ "é" | tojson }} {{ {"a": [1, {"b": 2}]} | tojson(indent=2) }}', {}],
  ['{{ "caf\u00e9 \u{1F600}" | tojson(ensure_ascii=true) }} {{ {"b": 1, "a": 2} | tojson(sort_keys=true) }} {{ [1, 2] | tojson(separators=[",", ":"]) }}', {}],
  ['{{ "42" | int }} {{ "x" | int }} {{ "3.5" | float }} {{ 3.9 | int }} {{ -2 | abs }} {{ true | int }} {{ 5 | string }} {{ 2.0 | string }}', {}],
  ['{{ "a-b-c" | replace("-", "+") }} {{ "aaa" | replace("a", "b", 2) }} {{ "ab" | replace("", "_") }}', {}],
  ['{{ [{"n": 1}, {"n": 2}, {"m": 3}] | map(attribute="n") | list }} {{ [{"a": {"b": 5}}] | map(attribute="a.b") | first }}', {}],
  ['{{ [{"t": 1, "v": "a"}, {"t": 0, "v": "b"}] | selectattr("t") | list | length }} {{ [{"r": "u"}, {"r": "a"}] | selectattr("r", "equalto", "a") | list }} {{ [{"r": "u"}, {"r": "a"}] | rejectattr("r", "equalto", "a") | list }}', {}],
  ['{{ [1, 2, 1, "1"] | unique | list }} {{ "line1\\nline2\\n\\nline4" | indent(2) }} {{ "a\\nb" | indent(2, true) }}', {}],
  ['{{ x | safe }} {{ 5 | string | length }}', { x: '<b>' }],
  ['{% filter upper %}shout {{ "it" }}{% endfilter %}', {}],
  // tests
  ['{% for v in [none, true, 1, 1.5, "s", [1], {"a": 1}] %}{{ v is none }}{{ v is boolean }}{{ v is number }}{{ v is integer }}{{ v is string }}{{ v is mapping }}{{ v is iterable }}{{ v is sequence }};{% endfor %}', {}],
  ['{{ x is defined }} {{ x is undefined }} {{ y is not none }} {{ 3 is odd }} {{ 4 is even }} {{ "ab" is lower }} {{ "AB" is upper }} {{ range is callable }}', { y: 1 }],
  // operators: comparison, membership, equality quirks
  ['{{ 1 == 1.0 }} {{ "1" == 1 }} {{ none == x }} {{ [1] == [1] }} {{ 1 != 2 }} {{ 2 < 3 }} {{ 3 >= 3 }}', {}],
  ['{{ "a" in "cat" }} {{ "b" in ["a", "b"] }} {{ 1 in ["1"] }} {{ "k" in {"k": 1} }} {{ "z" not in ["a"] }} {{ x in [1] }}', {}],
  ['{{ 1 if true }}|{{ 1 if false }}|{{ "a" if x else "b" if y else "c" }}', { y: true }],
  ['{{ (1, 2)[1] }} {{ -x }} {{ not x }} {{ -(2 + 3) * 2 }}', { x: 4 }],
  // subscripts, slices, attributes, methods
  ['{{ messages[0].role }} {{ messages[-1]["content"] }} {{ messages[5] }} {{ messages.0.role }} {{ messages | length }}', { messages: msgs }],
  ['{{ [1, 2, 3, 4, 5][1:3] }} {{ [1, 2, 3, 4, 5][::2] }} {{ [1, 2, 3][::-1] }} {{ [1, 2, 3][-2:] }} {{ "hello"[1:-1] }} {{ "hello"[0] }} {{ "hello"[-1] }}', {}],
  ['{{ "a,b,,c".split(",") }} {{ "  a  b ".split() }} {{ "a b c".split(" ", 1) }} {{ "x".startswith("x") }} {{ "x.py".endswith((".js", ".py")) }}', {}],
  ['{{ "  s  ".strip() }}|{{ "  s  ".lstrip() }}|{{ "  s  ".rstrip() }}|{{ "Ab".upper() }}{{ "Ab".lower() }}|{{ "a-b".replace("-", "") }}|{{ "abc".length }}', {}],
  ['{{ d.get("a") }} {{ d.get("zz") }} {{ d.get("zz", 7) }} {{ d.keys() }} {{ d.values() }} {{ d.items() }} {{ d.missing.deeper }}', { d: { a: 1, b: [2] } }],
  ['{{ range(3) }} {{ range(1, 4) }} {{ range(5, 0, -2) }} {{ range(0) }}', {}],
  ['{{ "%s" }} {{ True }} {{ False }} {{ None }}', {}],
  // runtime errors the reference raises
  ['{{ raise_exception("custom failure") }}', {}],
  ['{{ undefined_fn() }}', {}],
  ['{{ x.y | upper }}', { x: {} }],
  ['{{ 1 + none }}', {}],
  ['{{ "a" ~ missing }}', {}],
  ['{% for x in 5 %}{% endfor %}', {}],
  ['{{ {"a": 1}[0] }}', {}],
  ['{{ [1, 2] | upper }}', {}],
  ['{{ 1 < "a" }}', {}],
  ['{{ "x".split("") }}', {}],
  ['{% set a, b = [1] %}', {}],
  // parse errors the reference raises
  ['{% if x %}unclosed', {}],
  ['{% for %}{% endfor %}', {}],
  ['{{ 1 + }}', {}],
  ['{% frobnicate %}', {}],
  ['{{ "unterminated }}', {}],
  ['{# no end', {}],
];

module.exports = { snippets };
