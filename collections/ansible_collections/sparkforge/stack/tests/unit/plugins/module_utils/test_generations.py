# -*- coding: utf-8 -*-
"""Unit tests of module_utils/fleet/generations.py on a wheelhouse made in a temporary directory."""
# A lineage's generations live in <wheelhouse>/generations/<lineage>.json, their wheels in
# <wheelhouse>/<class id>/<name>-<key>/: a torch upgrade is a new class of the same lineage.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen


def put(wheelhouse, cls, name, key, content):
    """A wheel file in the class's wheelhouse directory; its entry as fleet_wheels describes it."""
    directory = os.path.join(wheelhouse, cls, "%s-%s" % (name, key))
    os.makedirs(directory, exist_ok=True)
    filename = "%s-1.0-py3-none-any.whl" % name
    with open(os.path.join(directory, filename), "wb") as handle:
        handle.write(content)
    return {"name": name, "kind": "artifact", "dir": os.path.basename(directory), "file": filename,
            "sha256": hashlib.sha256(content).hexdigest(), "cache_key": key * 4, "manifest": {"commit": key}}


def test_publish_numbers_new_sets_reuses_equal_ones_and_prunes(tmp_path):
    wh = str(tmp_path)
    w1 = [put(wh, "c1", "torch", "1" * 16, b"t1"), put(wh, "c1", "torchvision", "a" * 16, b"v1")]
    r1 = gen.publish(wh, "hopper", "c1", w1, "h1", {"torch": "2.10.0"}, keep=2, now="t1")
    assert (r1["generation"], r1["new"], r1["previous"]) == (1, True, None)
    again = gen.publish(wh, "hopper", "c1", w1, "h1", {"torch": "2.10.0"}, keep=2, now="t2")
    assert (again["generation"], again["new"]) == (1, False)
    assert gen.load(wh, "hopper")["generations"][0]["created"] == "t1"

    # A torch upgrade is another class (another wheelhouse directory), the same lineage.
    w2 = [put(wh, "c2", "torch", "2" * 16, b"t2"), put(wh, "c2", "torchvision", "a" * 16, b"v1")]
    assert gen.publish(wh, "hopper", "c2", w2, "h1", {}, keep=2, now="t3")["generation"] == 2
    w3 = [put(wh, "c2", "torch", "3" * 16, b"t3"), w2[1]]
    r3 = gen.publish(wh, "hopper", "c2", w3, "h1", {}, keep=2, now="t4")
    # Generation 1 goes with the directories only it used; c2's torchvision dir, still used, stays.
    assert (r3["generation"], r3["previous"], r3["pruned"]) == (3, 2, [1])
    assert r3["removed_dirs"] == ["c1/torch-" + "1" * 16, "c1/torchvision-" + "a" * 16]
    assert r3["generations"] == [2, 3]
    assert os.listdir(os.path.join(wh, "c1")) == [] and sorted(os.listdir(os.path.join(wh, "c2"))) == [
        "torch-" + "2" * 16, "torch-" + "3" * 16, "torchvision-" + "a" * 16]
    data = gen.load(wh, "hopper")
    assert data["pruned"] == [1] and gen.find(data, 3)["wheels"] == w3 and gen.find(data, 3)["class"] == "c2"
    assert gen.generation_dir(wh, gen.find(data, 3)) == os.path.join(wh, "c2")
    with pytest.raises(gen.GenerationError, match="generation 1 of hopper was pruned .*newest 2"):
        gen.find(data, 1)
    with pytest.raises(gen.GenerationError, match="hopper has no generation 9 \\(it has 2, 3\\)"):
        gen.find(data, 9)
    # A number is never given twice, even after its generation was pruned.
    w4 = [put(wh, "c2", "torch", "4" * 16, b"t4"), w2[1]]
    assert gen.publish(wh, "hopper", "c2", w4, "h1", {}, keep=5, now="t5")["generation"] == 4


def test_publish_refuses_missing_or_corrupt_wheels_and_records_nothing(tmp_path):
    wh = str(tmp_path)
    good = put(wh, "c", "torch", "1" * 16, b"t1")
    corrupt = dict(good, sha256="0" * 64)
    with pytest.raises(gen.GenerationError, match="sha256 %s, the generation records 0{64}" % good["sha256"]):
        gen.publish(wh, "l", "c", [corrupt], "h1", {}, keep=3, now="t")
    missing = dict(good, file="gone.whl")
    with pytest.raises(gen.GenerationError, match="gone.whl missing from"):
        gen.publish(wh, "l", "c", [missing], "h1", {}, keep=3, now="t")
    with pytest.raises(gen.GenerationError, match="must be plain names"):
        gen.publish(wh, "l", "c", [dict(good, dir="../elsewhere")], "h1", {}, keep=3, now="t")
    with pytest.raises(gen.GenerationError, match="lacks sha256"):
        gen.publish(wh, "l", "c", [dict(good, sha256="")], "h1", {}, keep=3, now="t")
    with pytest.raises(gen.GenerationError, match="keep must be at least 1"):
        gen.publish(wh, "l", "c", [good], "h1", {}, keep=0, now="t")
    with pytest.raises(gen.GenerationError, match="lineage '../x' is not a file name"):
        gen.publish(wh, "../x", "c", [good], "h1", {}, keep=3, now="t")
    assert not os.path.exists(os.path.join(wh, "generations"))
    r = gen.publish(wh, "l", "c", [good], "h1", {}, keep=3, now="t", check_mode=True)
    assert r["generation"] == 1 and r["new"] and not os.path.exists(os.path.join(wh, "generations"))


def test_record_verify_changes_only_when_the_result_does(tmp_path):
    wh = str(tmp_path)
    gen.publish(wh, "l", "c", [put(wh, "c", "torch", "1" * 16, b"t")], "h1", {}, keep=3, now="t")
    assert gen.record_verify(wh, "l", 1, "passed", "h1", "", "t1") is True
    assert gen.record_verify(wh, "l", 1, "passed", "h1", "", "t2") is False
    assert gen.find(gen.load(wh, "l"), 1)["verify"] == {"state": "passed", "host": "h1", "detail": "", "at": "t1"}
    with pytest.raises(gen.GenerationError, match="must be passed or failed"):
        gen.record_verify(wh, "l", 1, "maybe", "h1", "", "t")


def target(number, cls="c"):
    return {"lineage": "l", "class": cls, "number": number}


def test_host_transitions_keep_the_rollback_target(tmp_path):
    r = gen.host_transition({}, target(1), "installing", "upgrade", "t1", {"torch": "a"})
    assert r["previous"] is None and r["history"] == [] and r["lineage"] == "l"
    r = gen.host_transition(r, target(1), "verified", "upgrade", "t2")
    assert r["wheels"] == {"torch": "a"} and r["previous"] is None
    r = gen.host_transition(r, target(2, "c2"), "installing", "upgrade from 1", "t3", {"torch": "b"})
    assert r["previous"]["generation"] == 1 and r["previous"]["wheels"] == {"torch": "a"} and r["class"] == "c2"
    assert gen.host_view(r)["partial"] is True
    # Failed, then rolled back: the target stays generation 1, the failed attempt is history.
    r = gen.host_transition(r, target(2, "c2"), "failed", "verify failed", "t4")
    r = gen.host_transition(r, target(1), "rolled_back", "rolled back from 2: verify failed", "t5", {"torch": "a"})
    assert r["previous"]["generation"] == 1
    assert [h["state"] for h in r["history"]] == ["installing", "verified", "installing", "failed"]
    path = gen.host_file(str(tmp_path))
    gen.write_host(path, r)
    assert gen.read_host(path) == r and gen.read_host(str(tmp_path / "none.json")) == {}
    with pytest.raises(gen.GenerationError, match="host state must be one of"):
        gen.host_transition(r, target(1), "happy", "", "t")


def test_compare_gives_each_host_a_verdict(tmp_path):
    wh = str(tmp_path)
    w1 = [put(wh, "c", "torch", "1" * 16, b"t1")]
    gen.publish(wh, "l", "c", w1, "h1", {}, keep=1, now="t")
    w2 = [put(wh, "c", "torch", "2" * 16, b"t2")]
    gen.publish(wh, "l", "c", w2, "h1", {}, keep=1, now="t")
    data = gen.load(wh, "l")
    on2 = gen.host_transition({}, target(2), "verified", "upgrade", "t", {"torch": w2[0]["sha256"]})
    assert gen.compare("a", on2, {"torch": w2[0]["sha256"]}, data)["verdict"] == "current"
    assert gen.compare("a", on2, {"torch": "x"}, data)["verdict"] == "diverged: torch not as generation 2 records"
    partial = gen.host_transition(on2, target(2), "installing", "repair", "t")
    assert gen.compare("a", partial, {}, data)["verdict"] == "partial: an install of generation 2 was interrupted"
    on1 = gen.host_transition({}, target(1), "verified", "upgrade", "t", {"torch": w1[0]["sha256"]})
    assert gen.compare("a", on1, {}, data)["verdict"] == "on pruned generation 1"
    assert gen.compare("a", {}, {}, data)["verdict"] == "never upgraded"


def test_load_refuses_a_broken_record(tmp_path):
    (tmp_path / "generations").mkdir()
    path = tmp_path / "generations" / "l.json"
    path.write_text("{not json")
    with pytest.raises(gen.GenerationError, match="is not valid JSON"):
        gen.load(str(tmp_path), "l")
    path.write_text(json.dumps({"generations": "x"}))
    with pytest.raises(gen.GenerationError, match="has no list of generations"):
        gen.load(str(tmp_path), "l")
