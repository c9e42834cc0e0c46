package chattemplate

import "testing"

func TestRewriteTag(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no tojson", "{{ x }}", "{{ x }}"},
		{"name", "{{ tool | tojson }}", "{{ __tfd_tojson(tool) }}"},
		{"no spaces", "{{tool|tojson}}", "{{ __tfd_tojson(tool) }}"},
		{"arguments", "x {{- t | tojson(indent=4) }}", "x{{ __tfd_tojson(t, indent=4) }}"},
		{"attributes and subscripts", "{{ m['tool_calls'][0].function.arguments | tojson -}}",
			"{{ __tfd_tojson(m['tool_calls'][0].function.arguments) }}"},
		{"call operand", "{{ d.get('a', 1) | tojson }}", "{{ __tfd_tojson(d.get('a', 1)) }}"},
		{"earlier filters", "{{ tools | map(attribute='f') | list | tojson }}",
			"{{ __tfd_tojson(tools | map(attribute='f') | list) }}"},
		{"later filters", "{{ x | tojson | length }}", "{{ __tfd_tojson(x) | length }}"},
		{"twice in a chain", "{{ x | tojson | tojson }}", "{{ __tfd_tojson(__tfd_tojson(x)) }}"},
		{"binds tighter than +", "{{ 'a' + x | tojson + 'b' }}", "{{ 'a' + __tfd_tojson(x) + 'b' }}"},
		{"group", "{{ (a or b) | tojson }}", "{{ __tfd_tojson((a or b)) }}"},
		{"list literal", "{{ [1, 2] | tojson }}", "{{ __tfd_tojson([1, 2]) }}"},
		{"dict literal", "{{ {'a': x | tojson} | tojson }}", "{{ __tfd_tojson({'a': __tfd_tojson(x)}) }}"},
		{"string literal with subscript", "{{ 'abc'[1:] | tojson }}", "{{ __tfd_tojson('abc'[1:]) }}"},
		{"after a keyword", "{% if not (x) | tojson %}", "{% if not __tfd_tojson((x)) %}"},
		{"in a set statement", "{%- set s = x.y | tojson(ensure_ascii=true) -%}",
			"{% set s = __tfd_tojson(x.y, ensure_ascii=true) %}"},
		{"in a string literal", `{{ "x | tojson" ~ '}}' }}{{ y|tojson }}`, `{{ "x | tojson" ~ '}}' }}{{ __tfd_tojson(y) }}`},
		{"in text and comments", "a | tojson {# x | tojson #} {{ x | tojson }}", "a | tojson  {{ __tfd_tojson(x) }}"},
		{"several tags", "{{ a|tojson }}-{{ b|tojson }}", "{{ __tfd_tojson(a) }}-{{ __tfd_tojson(b) }}"},
		{"no operand", "{{ | tojson }}", "{{ | tojson }}"},
		{"nested dicts", "{{ {'a': {'b': 1}} | tojson }}", "{{ __tfd_tojson({'a': {'b': 1} }) }}"},
		{"string escapes", `{{ 'a\rb\x41\u00e9\101\q\'\\' ~ "\"" ~ 'x\N{DASH}' }}`,
			"{{ 'a\rbAéA\\\\q\\'\\\\' ~ '\"' ~ 'x\\N{DASH}' }}"},
		{"a name containing tojson", "{{ x | tojsonish }}", "{{ x | tojsonish }}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := normalize(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("normalize(%q) =\n%q, %v\nwant\n%q", tt.in, got, err, tt.want)
			}
		})
	}
}
