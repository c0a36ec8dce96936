# -*- coding: utf-8 -*-
"""Keys written twice in one YAML mapping (module_utils/plan/yaml_keys.py, issue 52 item 8): a key a mapping writes
itself twice is named with its file, line and first line; a key after a `<<:` merge that overrides a merged one is
not, unlike ansible-core's duplicate_dict_key check. The runs through spark.yml: tests/integration/
test_names_playbook.py (G07, G10-G12)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import yaml
from hypothesis import given, settings, strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils.plan import yaml_keys

MERGED = """\
base: &base
  a: 1
  b: 2
more: &more
  c: 3
one:
  <<: *base
  b: 3
many:
  <<: [*base, *more]
  a: 0
  c: 0
"""


def test_a_merge_key_with_overrides_is_no_duplicate_and_loads_as_yaml_says():
    assert yaml_keys.text_duplicates(MERGED, "m.yml") == []
    data = yaml.safe_load(MERGED)
    assert data["one"] == {"a": 1, "b": 3} and data["many"] == {"a": 0, "b": 2, "c": 0}


def test_a_key_written_twice_is_named_with_file_line_and_first_line():
    text = "all:\n  vars:\n    x: 1\n    y: 2\n    x: 3\n  hosts:\n    h:\n      <<: {x: 1}\n      x: 2\n      x: 4\n"
    assert yaml_keys.text_duplicates(text, "inv.yml") == [
        "inv.yml:5: key 'x' is written twice in one mapping (first at line 3): YAML keeps only the last and the first "
        "is silently lost; remove one (a key after a '<<:' merge, which overrides the merged one, is fine)",
        "inv.yml:10: key 'x' is written twice in one mapping (first at line 9): YAML keeps only the last and the first "
        "is silently lost; remove one (a key after a '<<:' merge, which overrides the merged one, is fine)"]


def test_inside_an_anchor_sequences_and_every_document_and_once_per_alias():
    text = "a: &a\n  k: 1\n  k: 2\nb: *a\nc: *a\nlist:\n  - {p: 1, p: 2}\n---\nz: 1\nz: 2\n"
    found = yaml_keys.text_duplicates(text, "f")
    # The lines are the file's, across its documents.
    assert [m.split(" is written")[0] for m in found] == ["f:3: key 'k'", "f:7: key 'p'", "f:10: key 'z'"], found


def test_keys_equal_as_yaml_reads_them_and_tags_only_ansible_knows():
    assert len(yaml_keys.text_duplicates("1: a\n0x1: b\n", "f")) == 1  # both the int 1
    assert yaml_keys.text_duplicates("'1': a\n1: b\n", "f") == []  # a string and an int
    assert len(yaml_keys.text_duplicates("s: !vault |\n  $ANSIBLE_VAULT;1.1\ns: !unsafe x\n", "f")) == 1


def test_what_is_not_yaml_is_left_to_ansible(tmp_path):
    assert yaml_keys.text_duplicates("[web]\nhost1\nhost1\n", "hosts.ini") == []  # an INI inventory
    assert yaml_keys.text_duplicates("$ANSIBLE_VAULT;1.1;AES256\n6162\n", "v.yml") == []
    assert yaml_keys.text_duplicates("a: [1\n", "broken.yml") == []
    assert yaml_keys.file_duplicates(str(tmp_path / "missing.yml")) == []


def test_the_run_reads_inventory_var_files_extra_vars_and_playbooks(tmp_path):
    inv = tmp_path / "inv"
    (inv / "group_vars" / "sparks").mkdir(parents=True)
    (inv / "hosts.yml").write_text("all:\n  hosts:\n    h: {a: 1, a: 2}\n")
    (inv / "hosts.ini").write_text("[x]\nh\n")
    (inv / "examples").mkdir()
    (inv / "examples" / "site.yml").write_text("a: 1\na: 2\n")  # inventory_ignore_patterns: Ansible skips it
    (inv / "group_vars" / "sparks" / "main.yml").write_text("k: 1\nk: 1\n")
    (inv / "group_vars" / "sparks" / "notes.txt").write_text("k: 1\nk: 1\n")  # not a variable file
    (inv / "host_vars").mkdir()
    (inv / "host_vars" / "h").write_text("k: 1\nk: 1\n")  # no ending: Ansible reads it
    (tmp_path / "extra.yml").write_text("e: 1\ne: 2\n")
    (tmp_path / "play.yml").write_text("- hosts: all\n  hosts: h\n")
    found = yaml_keys.run_duplicates([str(inv)], [str(inv), str(tmp_path)],
                                     ["@extra.yml", "k=v", '{"j": 1, "j": 2}'], ["play.yml"], str(tmp_path),
                                     ignore=["examples"])
    heads = [m.split(" is written")[0] for m in found]
    assert heads == ["%s/hosts.yml:3: key 'a'" % inv, "%s/group_vars/sparks/main.yml:2: key 'k'" % inv,
                     "%s/host_vars/h:2: key 'k'" % inv, "%s/play.yml:2: key 'hosts'" % tmp_path,
                     "%s/extra.yml (-e @extra.yml):2: key 'e'" % tmp_path,
                     "-e '{\"j\": 1, \"j\": 2}':1: key 'j'"], heads


@settings(max_examples=200, derandomize=True, deadline=None)
@given(anchor=st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 9), min_size=1, max_size=6),
       own=st.lists(st.sampled_from("abcdefgh"), min_size=0, max_size=8))
def test_property_only_keys_the_mapping_writes_itself_twice_are_duplicates(anchor, own):
    """Any anchor merged and any keys written after it (overrides or new): the duplicates named are exactly the keys
    written more than once after the merge, each at its second and later lines, and YAML loads the overrides."""
    lines = ["base: &base"] + ["  %s: %d" % kv for kv in sorted(anchor.items())] + ["m:", "  <<: *base"]
    start = len(lines) + 1
    lines += ["  %s: %d" % (key, i) for i, key in enumerate(own)]
    found = yaml_keys.text_duplicates("\n".join(lines) + "\n", "p")
    want = ["p:%d: key '%s'" % (start + i, key) for i, key in enumerate(own) if key in own[:i]]
    assert sorted(m.split(" is written")[0] for m in found) == sorted(want), lines
    if not want:
        loaded = yaml.safe_load("\n".join(lines) + "\n")["m"]
        assert loaded == dict(anchor, **dict((key, i) for i, key in enumerate(own)))
