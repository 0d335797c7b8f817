from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.log.grammar import (
    Collector,
    exception_text,
    has_collector_prefix,
    is_continuation,
    parse_line,
    records,
    split_records,
    strip_collector,
)

RECORD = "(EngineCore_DP0 pid=7) ERROR 05-09 10:31:24 [core.py:1136] ValueError: bad"


@pytest.mark.parametrize("raw, proc, pid, level, ts, src, msg", [
    ("(APIServer pid=13083) INFO 05-09 10:31:24 [utils.py:233] non-default args: {}",
     "APIServer", 13083, "INFO", "05-09 10:31:24", "utils.py:233", "non-default args: {}"),
    ("(EngineCore_DP0 pid=7) ERROR 05-09 10:31:24 [core.py:1136] EngineCore failed to start.",
     "EngineCore_DP0", 7, "ERROR", "05-09 10:31:24", "core.py:1136", "EngineCore failed to start."),
    ("(Worker_TP0 pid=8) WARNING 05-09 10:31:24 [custom_all_reduce.py:144] Custom allreduce is disabled",
     "Worker_TP0", 8, "WARNING", "05-09 10:31:24", "custom_all_reduce.py:144", "Custom allreduce is disabled"),
    ("(VllmWorker-0 pid=9) INFO 11-30 07:02:33 [vllm.py:725] x", "VllmWorker-0", 9, "INFO", "11-30 07:02:33",
     "vllm.py:725", "x"),
    ("(APIServer pid=1) INFO:     Application startup complete.", "APIServer", 1, "INFO", None, "uvicorn",
     "Application startup complete."),
    ("INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK", None, None, "INFO", None, "uvicorn",
     "127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK"),
    ("(APIServer pid=1) Traceback (most recent call last):", "APIServer", 1, None, None, None,
     "Traceback (most recent call last):"),
    ("\x1b[32mINFO\x1b[0m 05-09 10:31:24 [a.py:1] coloured\r", None, None, "INFO", "05-09 10:31:24", "a.py:1", "coloured"),
    # the V0 engine (0.6-0.10): no opening bracket before the source
    ("ERROR 08-27 05:12:18 worker_base.py:382] RuntimeError: NCCL error", None, None, "ERROR", "08-27 05:12:18",
     "worker_base.py:382", "RuntimeError: NCCL error"),
    ("(VllmWorkerProcess pid=141) INFO 09-19 08:57:55 multiproc_worker_utils.py:244] Worker exiting",
     "VllmWorkerProcess", 141, "INFO", "09-19 08:57:55", "multiproc_worker_utils.py:244", "Worker exiting"),
    # Ray's tags carry the node address; SkyPilot's the task name
    ("(RayWorkerWrapper pid=5, ip=10.0.0.2) ERROR 04-07 00:57:46 ray_utils.py:45] boom", "RayWorkerWrapper", 5,
     "ERROR", "04-07 00:57:46", "ray_utils.py:45", "boom"),
    ("(task, pid=1234) ValueError: x", "task", 1234, None, None, None, "ValueError: x"),
    ("(pid=77) ImportError: y", None, 77, None, None, None, "ImportError: y"),
])
def test_parse_line(raw, proc, pid, level, ts, src, msg):
    line = parse_line(raw)
    assert (line.proc, line.pid, line.level, line.ts, line.src, line.msg) == (proc, pid, level, ts, src, msg)


def test_ray_tag_keeps_the_address():
    assert parse_line("(RayWorkerWrapper pid=5, ip=10.0.0.2) x").ip == "10.0.0.2"


@pytest.mark.parametrize("prefixed", [
    "2025-05-09T10:31:24.123456789Z " + RECORD,                              # docker logs -t
    "2025-05-09T10:31:24.123456+00:00 stderr F " + RECORD,                    # Kubernetes CRI
    "May 09 10:31:24 gpu-node-1 vllm[4242]: " + RECORD,                       # journald
    "vllm-1  | " + RECORD,                                                    # docker compose
    "vllm-eb_1  | " + RECORD,
    "[pod/vllm-0/vllm] " + RECORD,                                            # kubectl logs --prefix
    "[rank0]: " + RECORD,                                                     # torchrun
    "[vllm]: " + RECORD,                                                      # a supervisor's name
    "[address=0.0.0.0:38617, pid=3310] " + RECORD,                            # an actor framework's wrapper
    "2025-05-09 10:31:24,123 xinference.core.worker 4242 INFO     " + RECORD,  # a supervisor's own INFO
    "2025-05-09 10:31:24,123 - vllm_runner - INFO - " + RECORD,
    "[2025-05-09 10:31:24] [INFO] " + RECORD,
    "2025-05-09T10:31:24Z [vllm]: " + RECORD,                                 # prefixes stack
])
def test_collector_prefixes_come_off(prefixed):
    assert has_collector_prefix(prefixed)
    assert records(prefixed) == [RECORD]
    assert parse_line(records(prefixed)[0]).level == "ERROR"


def test_a_supervisor_prefix_in_the_middle_of_a_line_comes_off_too():
    assert records("launcher: starting " + RECORD) == [RECORD]


def test_vllms_own_and_uvicorns_levels_are_not_taken_for_a_supervisors():
    assert strip_collector("2025-05-09T10:31:24Z INFO 05-09 10:31:24 [a.py:1] x")[0] == "INFO 05-09 10:31:24 [a.py:1] x"
    assert strip_collector("2025-05-09T10:31:24Z ERROR:    [Errno 98] address already in use")[0] == \
        "ERROR:    [Errno 98] address already in use"


def test_docker_json_file_records_and_cri_partial_lines():
    assert strip_collector(json.dumps({"log": RECORD + "\n", "stream": "stderr", "time": "2025"})) == (RECORD, False)
    assert strip_collector("2025-05-09T10:31:24.1Z stdout P " + RECORD[:20]) == (RECORD[:20], True)


def test_ray_cpp_lines_lose_their_stamp():
    assert strip_collector("[2023-07-11 15:20:41,680 E 42067 42067] logging.cc:97: Unhandled exception")[0] == \
        "logging.cc:97: Unhandled exception"


@pytest.mark.parametrize("joined, parts", [
    ("(APIServer pid=1) INFO 05-09 10:31:24 [a.py:1] loading" + RECORD, 2),
    ("Loading safetensors checkpoint shards: 100% Completed | 2/2\r" + RECORD, 2),
    ("(APIServer pid=2960)     hf_raise_for_status(response)(APIServer pid=2960)   File \"x.py\", line 1, in f"
     "(APIServer pid=2960) ValueError: bad", 3),
])
def test_joined_records_come_apart(joined, parts):
    out = split_records(joined)
    assert len(out) == parts
    assert out[-1].endswith("ValueError: bad")


def test_a_traceback_pasted_onto_one_line_comes_apart():
    out = split_records('Traceback (most recent call last): File "/x/y.py", line 3, in <module> main() '
                        'ValueError: the model is not supported')
    assert out[0] == "Traceback (most recent call last):"
    assert out[-1] == "ValueError: the model is not supported"


@pytest.mark.parametrize("msg, text", [
    ("ValueError: x", "ValueError: x"),
    ("  Value error, x [type=value_error]", "Value error, x [type=value_error]"),   # pydantic's two spaces
    ("    raise ValueError(msg)", None),                                           # code, quoted by a traceback
    ("raise RuntimeError(f\"NCCL error: {error_str}\")", None),                    # the same, indentation lost
    ("self.model_executor = executor_class(vllm_config)", None),
    ("hf_raise_for_status(response)", None),
    ("    | ValueError: inside a group", "ValueError: inside a group"),
    ("    torch.OutOfMemoryError: CUDA out of memory.", "torch.OutOfMemoryError: CUDA out of memory."),
])
def test_exception_text(msg, text):
    assert exception_text(msg) == text


@pytest.mark.parametrize("line, goes_on", [
    ("GiB). Based on the available memory, the estimated maximum model length is 16384.", True),
    ("(EngineCore pid=2) which is larger than the available KV cache memory", True),
    ("(APIServer pid=1) stray", False),                       # another process
    ("  File \"/x.py\", line 1, in f", False),                # a frame
    ("RuntimeError: Engine core initialization failed.", False),
    ("Segmentation fault (core dumped)", False),
    ("/usr/bin/ld: cannot find -lcuda", False),
    ("INFO 05-09 10:31:24 [a.py:1] next record", False),
    ("The above exception was the direct cause of the following exception:", False),
])
def test_is_continuation(line, goes_on):
    prev = parse_line("(EngineCore pid=2) ValueError: To serve at least one request with the models's max seq len "
                      "(32768), (4.00 GiB KV cache is needed,")
    assert is_continuation(prev, parse_line(line)) is goes_on


def test_a_collector_takes_its_prefix_off_every_line_of_a_block():
    lines = ["2025-05-09T10:31:%02d.1Z %s" % (i, l) for i, l in enumerate(["INFO 05-09 10:31:10 [a.py:1] x", RECORD])]
    collector = Collector.for_line(lines[0])
    assert collector.strip("\n".join(lines)) == "INFO 05-09 10:31:10 [a.py:1] x\n" + RECORD


def test_a_supervisors_header_after_its_stamp_comes_off_with_it():
    line = "2025-05-09 10:31:24,123 xinference.core.worker 4242 INFO     ValueError: bad"
    assert Collector.for_line(line).strip(line) == "ValueError: bad"


def test_cri_partial_lines_are_joined_within_and_across_blocks():
    ts = "2025-05-09T10:31:24.1+00:00 stderr "
    collector = Collector.for_line(ts + "F x")
    assert collector.strip(ts + "P aaa\n" + ts + "P bbb\n" + ts + "F ccc\n" + ts + "F next") == "aaabbbccc\nnext"
    assert collector.strip(ts + "F one\n" + ts + "P par") == "one"       # the partial waits for its end
    assert collector.strip(ts + "F tial") == "partial"


def test_lines_without_a_prefix_are_left_alone():
    collector = Collector.for_line("vllm-1  | " + RECORD)
    assert collector.strip("vllm-1  | a\nplain line") == "a\nplain line"
    assert Collector.for_line(RECORD) is None
