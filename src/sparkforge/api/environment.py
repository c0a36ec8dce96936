"""The environment and the command line a run starts ansible-playbook with, for the CLI (runs.run_playbook) and
scripts/spark (``python -m sparkforge.api.environment ROOT ansible-playbook ARGS...``): the checkout's
ansible.cfg and its protections whatever the user exported, a UTF-8 locale, and the options ansible-playbook
would misread refused before anything runs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

# The protections of the checkout's ansible.cfg, as the environment variables that would switch them off
# (ansible-core's config/base.yml: an environment variable wins over ansible.cfg), with the value that keeps them.
PROTECTIONS = {
    # A key written twice in one YAML mapping is refused by preflight's own check (lookup yaml_keys), which knows
    # that a key overriding a `<<:` merge is valid; ansible-core's own check ("error") refuses that too.
    "ANSIBLE_DUPLICATE_YAML_DICT_KEY": ("ignore", "preflight refuses a key written twice in one YAML mapping "
                                                  "itself (yaml_keys), and accepts a key overriding a <<: merge"),
    "ANSIBLE_INVENTORY_UNPARSED_FAILED": ("True", "an inventory that does not parse is an error"),
    "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": ("True", "an inventory source that does not parse is an error"),
}

# The directory the user runs from, for the collection's lookup sparkforge.stack.run_context (its name there too).
RUN_DIR_VAR = "SPARKFORGE_RUN_DIR"

# The locale a run gets when the user's is not UTF-8 (ansible-core refuses to start under any other);
# glibc has had it built in since 2.35, Debian and Ubuntu ship it.
UTF8_LOCALE = "C.UTF-8"
_TRUE = ("1", "true", "yes", "on", "y", "t")


def _locale_is_utf8(name):
    codeset = name.partition(".")[2].partition("@")[0]
    return codeset.lower().replace("-", "").replace("_", "") == "utf8"


def run_environment(environ, config):
    """(changes, notes): the variables to set for ansible-playbook over ``environ`` and one line for each
    setting of the user's that was overridden. ``config`` is the checkout's ansible.cfg (None: there is none)."""
    changes, notes = {}, []
    if config:
        given = environ.get("ANSIBLE_CONFIG")
        if given and os.path.realpath(given) != os.path.realpath(config):
            notes.append("ANSIBLE_CONFIG=%s from the environment is not used: the checkout's %s is, with its "
                         "protections (duplicate YAML keys and an inventory that does not parse are errors)"
                         % (given, config))
        changes["ANSIBLE_CONFIG"] = config
    for name, (value, why) in sorted(PROTECTIONS.items()):
        given = environ.get(name)
        same = given is not None and (given == value or (value == "True" and given.strip().lower() in _TRUE))
        if given is not None and not same:
            notes.append("%s=%s from the environment is overridden with %s: %s" % (name, given, value, why))
        changes[name] = value
    # The first of LC_ALL, LC_CTYPE, LANG that is set decides the encoding (POSIX's order).
    for name in ("LC_ALL", "LC_CTYPE", "LANG"):
        given = environ.get(name)
        if given:
            if not _locale_is_utf8(given):
                notes.append("%s=%s is not a UTF-8 locale, which ansible-core needs: the run uses LC_ALL=%s "
                             "(set a UTF-8 locale such as %s yourself to silence this)"
                             % (name, given, UTF8_LOCALE, UTF8_LOCALE))
                changes["LC_ALL"] = UTF8_LOCALE
            break
    return changes, notes


# ------------------------------------------------------------------ the command line

# ansible-playbook's options that take a value, by every spelling (a word after one of these is its value).
_VALUE_OPTIONS = {
    "-i", "--inventory", "--inventory-file", "-l", "--limit", "-e", "--extra-vars", "-t", "--tags", "--skip-tags",
    "-f", "--forks", "-u", "--user", "-c", "--connection", "-T", "--timeout", "-M", "--module-path",
    "--private-key", "--key-file", "--ssh-common-args", "--sftp-extra-args", "--scp-extra-args",
    "--ssh-extra-args", "--become-method", "--become-user", "--become-password-file", "--connection-password-file",
    "--vault-id", "--vault-password-file", "--vault-pass-file", "--start-at-task", "--playbook-dir",
    "--become-pass-file", "--conn-pass-file",
}
_SPELLINGS = {"-l": "limit", "--limit": "limit", "-t": "tags", "--tags": "tags", "--skip-tags": "skip-tags",
              "-e": "extra-vars", "--extra-vars": "extra-vars"}


def _options(argv):
    """(option, value, index of the word after the value) for each option of ``argv`` that takes a value,
    in every form: ``-l x``, ``-lx``, ``--limit x``, ``--limit=x``."""
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if word == "--":
            return
        if word in _VALUE_OPTIONS:
            if index < len(argv):
                yield word, argv[index], index + 1
                index += 1
        elif word.startswith("--") and "=" in word and word.split("=", 1)[0] in _VALUE_OPTIONS:
            yield word.split("=", 1)[0], word.split("=", 1)[1], index
        elif len(word) > 2 and word[0] == "-" and word[1] != "-" and word[:2] in _VALUE_OPTIONS:
            yield word[:2], word[2:], index


def _is_key_value(text):
    """An -e value ansible-playbook reads as key=value pairs (not @file, not YAML/JSON)."""
    text = text.strip()
    return bool(text) and text[0] not in "@{[/." and "=" in text


def argv_problems(argv, positional_ok=False):
    """Why ansible-playbook (or the CLI) would misread ``argv``, each as one line naming the option:

    * an empty ``-l``/``--limit`` (a ``-l "$HOST"`` with HOST unset) would run on every host;
    * an empty ``-t``/``--tags``/``--skip-tags`` would run, or skip, nothing that was meant;
    * an ``-e key=value`` followed by words that are no option (``-e sparkforge_venv=$DIR`` where $DIR holds a
      space: the shell split it, and the value ends at the space).  ``positional_ok``: the words after the
      ``-e`` value may be playbooks (ansible-playbook's own positional arguments), so only one that is no
      playbook file (.yml/.yaml) counts.
    """
    problems = []
    for option, value, after in _options(argv):
        kind = _SPELLINGS.get(option)
        if kind == "limit" and not value.replace(",", "").replace(":", "").strip():
            problems.append("%s %r is empty: it would run on every host of the inventory; give a host or group "
                            "pattern, or leave %s out to mean all hosts" % (option, value, option))
        elif kind in ("tags", "skip-tags") and not value.replace(",", "").strip():
            problems.append("%s %r names no tag: give one or more tags (comma-separated), or leave %s out"
                            % (option, value, option))
        elif kind == "extra-vars" and _is_key_value(value):
            stray = []
            for word in argv[after:]:
                if word.startswith("-") or (positional_ok and word.endswith((".yml", ".yaml"))):
                    break
                stray.append(word)
            if stray:
                problems.append("%s %s is followed by %s, which is no option: a value with a space that the shell "
                                "split? Quote the whole value: %s '%s'" % (
                                    option, value, " ".join(repr(w) for w in stray), option,
                                    _quoted_guess(value, stray)))
    return problems


def _quoted_guess(value, stray):
    key, _, rest = value.partition("=")
    return '%s="%s"' % (key, " ".join([rest] + stray)) if "=" not in rest and not any("=" in s for s in stray) \
        else " ".join([value] + stray)


def _main(argv=None):
    """``python -m sparkforge.api.environment ROOT PROGRAM ARGS...``: exec PROGRAM with ARGS in the run's
    environment (the checkout ROOT's ansible.cfg), after the notes on stderr; exit 4 on a misread command line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2:
        sys.stderr.write("usage: python -m sparkforge.api.environment ROOT PROGRAM [ARGS...]\n")
        return 4
    root, program, args = argv[0], argv[1], argv[2:]
    problems = argv_problems(args, positional_ok=True)
    for problem in problems:
        sys.stderr.write("%s: error: %s\n" % (os.path.basename(program), problem))
    if problems:
        return 4
    config = os.path.join(root, "ansible.cfg")
    changes, notes = run_environment(os.environ, config if os.path.isfile(config) else None)
    for note in notes:
        sys.stderr.write("sparkforge: %s\n" % note)
    sys.stderr.flush()
    env = dict(os.environ, **changes)
    os.execve(program, [program] + args, env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(_main())
