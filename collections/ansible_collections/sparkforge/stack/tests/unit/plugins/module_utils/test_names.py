"""module_utils/plan/names.py: names given to a run that match nothing (docs/bad-inputs.md, class G)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.sparkforge.stack.plugins.lookup.run_names import collection_names, playbook_tags
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import names

ROLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles")


def test_the_collections_tags_and_play_keyword_variables_are_read_from_its_yaml():
    tags, keyword_vars = collection_names(os.path.abspath(ROLES))
    assert {"preflight", "plan", "verify", "always"} <= tags
    assert "preflght" not in tags
    assert {"sparkforge_serial"} <= keyword_vars["serial"]
    assert {"sparkforge_max_fail_percentage"} <= keyword_vars["max_fail_percentage"]
    assert {"cluster_group", "xhost_group"} <= keyword_vars["hosts"]


def test_a_tag_nobody_uses_is_refused_with_the_closest_known_first():
    errors = names.unknown_tags(["preflght", "all"], ["verfy"], {"preflight", "verify", "plan"})
    assert errors[0].startswith("--tags preflght: no play or role of the collection has this tag")
    assert "known tags: preflight, " in errors[0]
    assert errors[1].startswith("--skip-tags verfy:") and "known tags: verify, " in errors[1]
    assert names.unknown_tags(["all"], [], {"x"}) == []
    assert names.unknown_tags(["plan", "always"], ["never"], {"plan"}) == []


def test_molecule_s_skip_tags_and_the_running_playbook_s_own_tags_are_known(tmp_path):
    """molecule runs every converge with --skip-tags molecule-notest,notest; a site's playbook beside the one
    running may tag its own tasks: neither is a typo."""
    assert names.unknown_tags([], ["molecule-notest", "notest", "molecule-idempotence-notest"], {"plan"}) == []
    (tmp_path / "site.yml").write_text("- hosts: all\n  tasks:\n    - name: x\n      ansible.builtin.debug:\n"
                                       "      tags: [site_extra]\n")
    (tmp_path / "broken.yml").write_text("- hosts: [\n")
    assert playbook_tags(str(tmp_path)) == {"site_extra"}


def test_a_host_pattern_matching_nothing_is_refused_and_patterns_that_match_pass():
    hosts, groups = ["spark1", "spark2", "gh1"], ["all", "ungrouped", "sparks", "dgx_spark"]
    for good in ("spark*", "sparks", "spark1,gh1", "all:!gh1", "~spark[0-9]", "sparks[0:1]", "&sparks", "@retry"):
        assert names.unmatched_patterns("--limit", good, hosts, groups) == [], good
    errors = names.unmatched_patterns("--limit", "spark1,spakr2", hosts, groups)
    assert len(errors) == 1 and errors[0].startswith("--limit: 'spakr2' matches no host or group of the inventory")
    assert "hosts: spark2, " in errors[0]
    errors = names.unmatched_patterns("-e cluster_group", "spraks", hosts, groups)
    assert "known groups: sparks, " in errors[0]


def test_a_group_vars_or_host_vars_file_naming_nothing_is_refused(tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "host_vars" / "spark1").mkdir(parents=True)
    for name in ("dgx-spark.yml", "all.yml", "sparks.yaml", "README.md", ".hidden.yml"):
        (tmp_path / "group_vars" / name).write_text("x: 1\n")
    (tmp_path / "host_vars" / "spark3.json").write_text("{}")
    errors = names.stray_var_files([str(tmp_path), None], ["spark1", "spark2"], ["all", "sparks", "dgx_spark"])
    assert errors == [
        "%s: no group of the inventory is named 'dgx-spark', so this file is never loaded; rename it to one of: "
        "dgx_spark, sparks, all" % (tmp_path / "group_vars" / "dgx-spark.yml"),
        "%s: no host of the inventory is named 'spark3', so this file is never loaded; rename it to one of: "
        "spark1, spark2" % (tmp_path / "host_vars" / "spark3.json")]


def test_a_play_keyword_variable_set_in_the_inventory_is_refused_saying_to_use_e():
    errors = names.play_vars_in_inventory({"serial": {"sparkforge_serial"}, "hosts": {"cluster_group"}},
                                          {"sparkforge_serial": "spark1"})
    assert errors == ["sparkforge_serial: set in the inventory (host spark1), where the play keyword serial: that "
                      "reads it does not look, so it would be ignored; set it with -e sparkforge_serial=VALUE"]


def test_play_keyword_variables_are_found_in_templates_only():
    found = names.play_keyword_vars([{"hosts": "{{ grp | default('all') }}", "serial": 3}, "x",
                                     {"hosts": "all", "max_fail_percentage": "{{ mfp }}"}])
    assert found == {"hosts": {"grp"}, "max_fail_percentage": {"mfp"}}
