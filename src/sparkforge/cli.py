"""``sparkforge plan|provision|verify|status|rollback|bundle|cluster|report|versions``: the command line over sparkforge.api.

Exit codes (scripts can rely on them):

* 0 -- every host ok (or changed);
* 2 -- at least one host failed a task (preflight problems included);
* 3 -- at least one host was unreachable (wins over 2);
* 4 -- usage error: bad arguments (a --since that is no version, a --run outside
  the reports directory, a --to that is no generation, an --out under a file),
  missing inventory/playbook/extra-vars file, an inventory or a playbook that
  does not parse, no report to show;
* 1 -- any other error (ansible-runner could not start, the run timed out).

Progress goes to stdout (stderr with ``--json``, where stdout holds only the JSON
result). With ``rich`` importable and a terminal attached it is drawn as live
bars for the running builds; otherwise, or with ``--plain``, as plain lines.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import sys

import yaml

from sparkforge import __version__, api, versions
from sparkforge.api import environment


def _bounded(kind, low, high):
    """An argparse type: a number of ``kind`` from ``low`` to ``high``, else an error naming the range
    (every numeric option of the CLI has one: a negative or zero timeout means nothing)."""
    def parse(text):
        if not text.isascii():
            # int() and float() read full-width and other Unicode digits ('９' as 9).
            raise argparse.ArgumentTypeError("%r has a non-ASCII character: type the digits 0-9" % text)
        try:
            value = kind(text)
        except ValueError:
            kind_name = "whole number" if kind is int else "number"
            raise argparse.ArgumentTypeError("%r is not a %s" % (text, kind_name)) from None
        if not low <= value <= high or value != value:
            raise argparse.ArgumentTypeError("%s is out of range (from %s to %s)" % (text, low, high))
        return value
    parse.__name__ = "%s from %s to %s" % (kind.__name__, low, high)
    return parse


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error; 2 means "a host failed" here, so use 4."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(api.EXIT_USAGE, "%s: error: %s\n" % (self.prog, message))


# --------------------------------------------------------------------- displays


class PlainDisplay:
    """One line per task start, per non-trivial host result, per build progress step."""

    def __init__(self, out, verbose=False):
        self.out = out
        self.verbose = verbose
        self._last_build = {}

    def _line(self, text):
        self.out.write(text + "\n")
        self.out.flush()

    def __call__(self, event):
        if event.kind == "play":
            self._line("PLAY %s" % (event.play or ""))
        elif event.kind == "task":
            self._line("TASK %s%s" % ("%s : " % event.role if event.role else "", event.task or ""))
        elif event.kind == "host":
            if event.state in ("failed", "unreachable"):
                self._line("  %s: %s: %s" % (event.host, event.state.upper(), event.message or ""))
            elif event.state == "changed" or self.verbose:
                self._line("  %s: %s%s" % (event.host, event.state,
                                           " (%s)" % event.message if event.message else ""))
        elif event.kind == "build":
            key = (event.host, (event.build or {}).get("build"))
            mark = (event.phase, event.state, int((event.percent or 0) // 5))
            if self._last_build.get(key) == mark:
                return
            self._last_build[key] = mark
            self._line("  %s: build %s %s %s%s%s" % (
                event.host, key[1] or event.task or "", event.phase or "", event.state or "",
                " %.1f%%" % event.percent if event.percent is not None else "",
                " %ss" % (event.build or {}).get("elapsed_s") if (event.build or {}).get("elapsed_s") is not None
                else ""))

    def close(self):
        pass


class RichDisplay:
    """Live progress with rich: a line per task, a bar per running build."""

    def __init__(self, out, verbose=False):
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(file=out)
        self.verbose = verbose
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                                 TimeElapsedColumn(), console=self.console, transient=False)
        self.bars = {}
        self.progress.start()

    def __call__(self, event):
        console = self.progress.console
        if event.kind == "play":
            console.print("[bold]PLAY[/bold] %s" % (event.play or ""), highlight=False)
        elif event.kind == "task":
            console.print("[cyan]TASK[/cyan] %s%s" % ("%s : " % event.role if event.role else "", event.task or ""),
                          highlight=False, markup=True)
        elif event.kind == "host":
            if event.state in ("failed", "unreachable"):
                console.print("  [red]%s: %s[/red] %s" % (event.host, event.state.upper(), event.message or ""),
                              highlight=False)
            elif event.state == "changed" or self.verbose:
                console.print("  [yellow]%s: %s[/yellow]" % (event.host, event.state), highlight=False)
        elif event.kind == "build":
            status = event.build or {}
            key = (event.host, status.get("build") or event.task)
            if key not in self.bars:
                self.bars[key] = self.progress.add_task("%s %s" % key, total=100, info="")
            info = "%s %s" % (event.phase or "", event.state or "")
            if status.get("done") is not None and status.get("total"):
                info += " %s/%s" % (status.get("done"), status.get("total"))
            self.progress.update(self.bars[key], completed=event.percent or 0, info=info)
            if event.state in ("done", "failed"):
                # A finished build leaves one line behind and frees its live bar.
                self.progress.remove_task(self.bars.pop(key))
                console.print("  %s: build %s %s (phase %s%s)%s" % (
                    event.host, key[1], event.state, event.phase or "?",
                    " %s/%s" % (status.get("done"), status.get("total")) if status.get("total") else "",
                    " in %ss" % status.get("elapsed_s") if status.get("elapsed_s") is not None else ""),
                    highlight=False, markup=False)

    def close(self):
        self.progress.stop()


def make_display(out, plain=False, verbose=False):
    if not plain and hasattr(out, "isatty") and out.isatty():
        try:
            return RichDisplay(out, verbose=verbose)
        except ImportError:
            pass
    return PlainDisplay(out, verbose=verbose)


# ----------------------------------------------------------------------- output


def _print_summary(result, out):
    write = out.write
    run = " run %s" % result.run_id if result.run_id else ""
    write("\n%s: %s (rc=%s, %.1fs)%s\n" % (result.action, result.status, result.rc, result.duration_s, run))
    if result.error:
        write("ERROR: %s\n" % result.error)
    if result.hosts:
        width = max(len(h) for h in result.hosts)
        write("%-*s  %-11s %5s %7s %6s %7s\n" % (width, "HOST", "STATE", "OK", "CHANGED", "FAILED", "SKIPPED"))
        for name in sorted(result.hosts):
            host = result.hosts[name]
            write("%-*s  %-11s %5d %7d %6d %7d\n" % (width, name, host.state, host.ok, host.changed, host.failed,
                                                     host.skipped))
    if result.action in ("plan", "bundle"):
        _print_sources(result, write)
    if result.action in ("status", "rollback"):
        _print_generations(result, write)
    for name in sorted(result.hosts):
        host = result.hosts[name]
        if result.action == "plan" and host.plan is not None:
            write("\nplan for %s:\n" % name)
            write("".join("  " + line + "\n" for line in
                          yaml.safe_dump(host.plan, default_flow_style=False, sort_keys=True).splitlines()))
        problems = host.problems if result.action == "plan" else \
            ["%s: %s" % (f.task, f.message) if f.task else f.message for f in host.failures]
        for problem in problems:
            write("%s: %s\n" % (name, problem))
        for wheel, digest in sorted(host.wheels.items()):
            write("%s: wheel %s sha256 %s\n" % (name, wheel, digest))
        for path in host.reports:
            write("%s: report %s\n" % (name, path))
    for warning in result.warnings:
        write("warning: %s\n" % warning)
    out.flush()


def _print_sources(result, write):
    """The sources table of every host's plan: host, source, URL, status or error, the variable to change."""
    rows = [("HOST", "SOURCE", "URL", "ERROR", "VARIABLE")]
    for name in sorted(result.hosts):
        for item in (result.hosts[name].plan or {}).get("sources") or []:
            rows.append((name, "%s: %s" % (item.get("component"), item.get("source")), item.get("url") or "",
                         item.get("error") or ("bundle: %s" % item["path"] if item.get("path") else None)
                         or item.get("status") or "", item.get("variable") or ""))
    if len(rows) == 1:
        return
    widths = [min(90, max(len(str(r[i])) for r in rows)) for i in range(5)]
    write("\nsources:\n")
    for row in rows:
        write("  " + "  ".join(str(c)[:90].ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")


def _print_generations(result, write):
    """One line per host: its class, generation, state and verdict against the controller's record."""
    rows = [("HOST", "CLASS", "GENERATION", "STATE", "VERDICT")]
    for row in result.generations:
        rows.append((row.get("host"), row.get("class") or "-", "-" if row.get("generation") is None
                     else str(row["generation"]), row.get("state") or "-", row.get("verdict") or ""))
    if len(rows) == 1:
        return
    widths = [max(len(str(r[i])) for r in rows) for i in range(5)]
    write("\ngenerations:\n")
    for row in rows:
        write("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")


def _print_report(rep, out):
    if rep.error:
        out.write("ERROR: %s\n" % rep.error)
        return
    out.write("report %s (%s)\n" % (rep.run, rep.path))
    for rel in sorted(rep.files):
        out.write("  %s\n" % rel)
    for host in sorted(rep.hosts):
        out.write("\n%s:\n" % host)
        out.write("".join("  " + line + "\n" for line in
                          yaml.safe_dump(rep.hosts[host], default_flow_style=False, sort_keys=True).splitlines()))
    if len(rep.runs) > 1:
        out.write("\nother runs: %s\n" % ", ".join(r for r in rep.runs if r != rep.run))
    out.flush()


# ------------------------------------------------------------------------ parser


def build_parser():
    parser = _Parser(prog="sparkforge", description="Provision and verify DGX Spark / GH200 PyTorch hosts.")
    parser.add_argument("--version", action="version", version="sparkforge %s" % __version__)
    parser.add_argument("--project-dir", help="repository with ansible.cfg and playbooks/ "
                                              "(default: $SPARKFORGE_HOME or this checkout)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def run_options(p, check_flag):
        p.add_argument("-i", "--inventory", action="append",
                       help="inventory file or directory, or 'host1,host2,' (repeatable; default "
                            "$SPARKFORGE_INVENTORY, else inventory/hosts.yml of the project)")
        p.add_argument("-l", "--limit", help="host pattern to limit the run to (given twice, the last one counts, "
                                             "as with ansible-playbook; empty is refused)")
        p.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                       help="key=value, @file.yml or a JSON mapping (repeatable)")
        p.add_argument("--playbook", help="playbook to run (default playbooks/spark.yml)")
        if check_flag:
            p.add_argument("-C", "--check", action="store_true", help="check mode: report, change nothing")
            p.add_argument("-D", "--diff", action="store_true", help="show diffs of changed files")
            p.add_argument("-t", "--tags", action="append",
                           help="only run tasks with these tags (comma-separated; repeatable, the tags add up)")
            p.add_argument("--skip-tags", action="append",
                           help="skip tasks with these tags (comma-separated; repeatable, the tags add up)")
        p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
        p.add_argument("--plain", action="store_true", help="plain progress lines, even on a terminal")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
        p.add_argument("-v", "--verbose", action="count", default=0,
                       help="show every host result; -vv.. also raise ansible's verbosity")
        p.add_argument("--timeout", type=_bounded(int, 1, 7 * 24 * 3600),
                       help="stop the run after this many seconds (1 to 604800)")
        p.add_argument("--keep-artifacts", action="store_true",
                       help="keep ansible-runner's private data dir (events, stdout) and print its path")

    run_options(sub.add_parser("plan", help="preflight in check mode: what each host would get, and problems"),
                False)
    run_options(sub.add_parser("provision", help="run the playbook"), True)
    run_options(sub.add_parser("verify", help="run the verify part (tag verify)"), False)
    run_options(sub.add_parser("status", help="each host's generation, read from the host, against the controller's"),
                False)
    back = sub.add_parser("rollback", help="put hosts back on an earlier generation (default: each one's previous)")
    run_options(back, False)
    back.add_argument("--to", metavar="G", help="the generation to go back to")
    bun = sub.add_parser(
        "bundle", help="collect what the inventory's plans fetch into one directory, for air-gapped sites",
        description="Make an offline bundle: plan every host of the inventory (source probing off), then, on this "
                    "machine, fetch everything those plans need - NVIDIA's CUDA apt repository (signed index files "
                    "and the planned .debs with their dependencies), cuda-keyring, the cuSPARSELt installer, bare "
                    "git mirrors of the pinned refs with their submodules, and the wheels for each host's Python "
                    "and CPU - into DIR, with manifest.json listing every file's sha256, size and origin. Carry DIR "
                    "to the air-gapped controller and set sparkforge_bundle: DIR in its inventory; preflight then "
                    "checks every file and stops a host whose plan needs an item the bundle lacks. A rerun fetches "
                    "only what is missing. The distribution's own packages are not bundled (a site mirror serves "
                    "them).")
    run_options(bun, False)
    bun.add_argument("--out", required=True, metavar="DIR", help="the bundle directory (created)")
    clu = sub.add_parser(
        "cluster", help="link the hosts of a cluster: fabric addressing, SSH, NCCL variables, cross-host check",
        description="Run playbooks/cluster.yml: read each host's fabric NICs from sysfs, check the cluster's addressing "
                    "(refused before any change: duplicate addresses, a missing interface, the management interface "
                    "as fabric, a port without link), apply the netplan drop-in with revert unless the connection "
                    "survives, set up passwordless SSH with the cluster's key and the hosts' own host keys, write the "
                    "fabric's NCCL/gloo variables, and run the cross-host check over the fabric. --check changes "
                    "nothing.")
    run_options(clu, False)
    clu.add_argument("-C", "--check", action="store_true", help="check mode: report, change nothing")
    clu.add_argument("-g", "--group", help="the inventory group of the cluster (default all)")
    versions.add_parser(sub)
    rep = sub.add_parser("report", help="show reports/<run>/ (the newest run by default)")
    rep.add_argument("--run", help="run id (a directory name under reports/)")
    rep.add_argument("--reports-dir", help="reports directory (default <project>/reports)")
    rep.add_argument("--list", action="store_true", help="list the run ids only")
    rep.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def _tag_list(values):
    """Every tag of repeated -t/--skip-tags options, each comma-separated, in order, once (ansible-playbook's
    meaning: the tags add up), or None."""
    tags = []
    for value in values or []:
        for tag in value.split(","):
            if tag.strip() and tag.strip() not in tags:
                tags.append(tag.strip())
    return tags or None


def _default_inventory(project_dir):
    env = os.environ.get("SPARKFORGE_INVENTORY")
    if env:
        return env
    candidate = os.path.join(api.project_root(project_dir), "inventory", "hosts.yml")
    return candidate if os.path.exists(candidate) else None


def main(argv=None, stdout=None, stderr=None):
    """Run the CLI; returns the exit code (the console script exits with it)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = build_parser()
    # What argparse would take, or refuse without saying why: an empty -l or -t, an -e split by the shell.
    problems = environment.argv_problems(list(sys.argv[1:] if argv is None else argv))
    if problems:
        parser.print_usage(stderr)
        stderr.write("".join("sparkforge: error: %s\n" % problem for problem in problems))
        return api.EXIT_USAGE
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else api.EXIT_USAGE

    if args.command == "versions":
        return versions.run(args, api.project_root(args.project_dir), stdout, stderr)

    if args.command == "report":
        base = args.reports_dir or os.path.join(api.project_root(args.project_dir), "reports")
        if args.list:
            runs = api.list_runs(base)
            stdout.write(json.dumps(runs) + "\n" if args.json else "".join(r + "\n" for r in runs))
            return api.EXIT_OK
        rep = api.report(run=args.run, reports_dir=base)
        if args.json:
            stdout.write(json.dumps(rep.to_dict(), indent=1, sort_keys=True, default=str) + "\n")
        else:
            _print_report(rep, stdout)
        return api.EXIT_USAGE if rep.error else api.EXIT_OK

    config = os.path.join(api.project_root(args.project_dir), "ansible.cfg")
    for note in environment.run_environment(os.environ, config if os.path.isfile(config) else None)[1]:
        # The run overrides these (runs.run_playbook); the user hears it before the run, on stderr.
        stderr.write("sparkforge: %s\n" % note)
    inventory = args.inventory or _default_inventory(args.project_dir)
    if isinstance(inventory, list) and len(inventory) == 1:
        inventory = inventory[0]
    progress_out = stderr if args.json else stdout
    display = None if args.quiet else make_display(progress_out, plain=args.plain, verbose=args.verbose > 0)
    kwargs = dict(limit=args.limit, extravars=args.extra_vars, playbook=args.playbook, on_event=display,
                  project_dir=args.project_dir, verbosity=max(0, args.verbose - 1), timeout=args.timeout,
                  keep_artifacts=args.keep_artifacts)
    try:
        if args.command == "plan":
            result = api.plan(inventory, **kwargs)
        elif args.command == "status":
            result = api.status(inventory, **kwargs)
        elif args.command == "rollback":
            result = api.rollback(inventory, to=args.to, **kwargs)
        elif args.command == "verify":
            result = api.verify(inventory, **kwargs)
        elif args.command == "bundle":
            result = api.bundle(inventory, out=args.out, **kwargs)
        elif args.command == "cluster":
            if args.group:
                # A group that matches no host is refused by the playbook's first play, naming the known groups.
                kwargs["extravars"] = list(kwargs["extravars"]) + ["cluster_group=%s" % args.group]
            kwargs["playbook"] = kwargs["playbook"] or os.path.join("playbooks", "cluster.yml")
            result = api.run_playbook("cluster", inventory, check=args.check, **kwargs)
        else:
            result = api.provision(inventory, check=args.check, diff=args.diff, tags=_tag_list(args.tags),
                                   skip_tags=_tag_list(args.skip_tags), **kwargs)
    finally:
        if display is not None:
            display.close()
    if args.json:
        stdout.write(json.dumps(result.to_dict(), indent=1, sort_keys=True, default=str) + "\n")
        stdout.flush()
    else:
        _print_summary(result, stdout)
    return result.exit_code()


if __name__ == "__main__":
    sys.exit(main())
