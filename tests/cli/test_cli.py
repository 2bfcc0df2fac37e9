"""The `tern` command line, run as a user would: real binary, real model."""
import os
import re
import signal
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TERN = os.path.join(ROOT, "build", "tern")
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def tern(*args, stdin=None, timeout=300):
    return subprocess.run([TERN, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def test_run_streams_only_generated_text_to_stdout():
    r = tern("run", "-p", "The capital of France is", "-n", "16", "--temp", "0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(" Paris"), r.stdout
    assert "loading" not in r.stdout  # logs and progress go to stderr
    assert "loading" in r.stderr


def test_run_is_deterministic_with_a_seed():
    a = tern("run", "-p", "Once upon a time", "-n", "24", "--temp", "0.9", "--seed", "7")
    b = tern("run", "-p", "Once upon a time", "-n", "24", "--temp", "0.9", "--seed", "7")
    assert a.returncode == 0 and b.returncode == 0
    assert a.stdout == b.stdout


def test_run_chat_mode_answers_a_question():
    # (The 135M model answers "capital of France?" badly in chat form; llama.cpp
    # gives the same odd answer. It does know this one.)
    r = tern("run", "--chat", "-p", "What is the boiling point of water?", "-n", "32", "--temp", "0")
    assert r.returncode == 0, r.stderr
    assert "100" in r.stdout


def test_stop_string_is_not_printed():
    r = tern("run", "-p", "1, 2, 3, 4, 5,", "-n", "32", "--temp", "0", "--stop", "9")
    assert r.returncode == 0, r.stderr
    assert "9" not in r.stdout
    assert "8" in r.stdout


def test_perplexity_prints_the_last_line_format(tmp_path):
    text = open(os.path.join(ROOT, "tests/fixtures/perplexity_text.txt")).read()
    f = tmp_path / "t.txt"
    f.write_text(text[:3000])
    r = tern("perplexity", "-f", str(f), "-c", "128")
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("perplexity: ")
    assert 1.0 < float(last.split(": ")[1]) < 200.0


def test_chat_session_over_stdin():
    r = tern("chat", "-n", "24", "--temp", "0", stdin="What is 2+2?\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert "4" in r.stdout


def test_chat_second_turn_reuses_the_first_turns_kv():
    # tern chat keeps one scheduler: turn 2's prompt starts with turn 1's
    # prompt and reply, whose KV the prefix cache hands back.
    r = tern("chat", "-n", "16", "--temp", "0", "--stats",
             stdin="What is 2+2?\nAnd what is 3+3?\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("> ") == 3  # two answered prompts, then /exit
    turns = re.findall(r"prompt: (\d+) tokens \((\d+) cached\)", r.stderr)
    assert len(turns) == 2, r.stderr
    (p1, c1), (p2, c2) = [(int(p), int(c)) for p, c in turns]
    assert c1 == 0
    assert p2 > p1 and c2 > 0, turns


def test_ctrl_c_cancels_the_generation():
    p = subprocess.Popen([TERN, "run", "-p", "1, 2, 3, 4, 5,", "-n", "3000", "--temp", "0",
                          "--stats"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.read(4)  # generating
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert time.monotonic() - t0 < 10
    assert p.returncode == 0, err
    assert "finish: cancelled" in err, err


@pytest.mark.parametrize("args,message", [
    (["run", "-p", "hi", "-m", "/nonexistent/model.gguf"], "cannot open"),
    (["run", "-p", "hi", "--temp", "-1"], "temperature"),
    (["run", "-p", "hi", "--top-p", "1.5"], "top_p"),
    (["perplexity", "-f", "/nonexistent.txt"], "cannot open"),
])
def test_bad_input_gets_a_clear_error(args, message):
    r = tern(*args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr


def test_corrupt_model_file_is_rejected_cleanly(tmp_path):
    bad = tmp_path / "bad.gguf"
    with open(MODEL, "rb") as f:
        bad.write_bytes(f.read(4096))  # a truncated copy
    r = tern("run", "-p", "hi", "-m", str(bad))
    assert r.returncode == 1
    assert "bad.gguf" in r.stderr and "error:" in r.stderr


def test_embed_prints_normalised_vectors_as_json():
    import json
    import math

    r = tern("embed", "-p", "Hello world", "-p", "The cat sat.", "--pooling", "last", "--tokens")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["pooling"] == "last" and out["normalize"] is True and out["n_embd"] == 576
    assert [d["index"] for d in out["data"]] == [0, 1]
    assert out["data"][0]["tokens"] == [19556, 905]  # no BOS: SmolLM2's vocabulary adds none
    for d in out["data"]:
        assert len(d["embedding"]) == 576
        assert abs(math.sqrt(sum(x * x for x in d["embedding"])) - 1) < 1e-5
    bad = tern("embed", "-p", "x", "--pooling", "rank")
    assert bad.returncode != 0 and "rank" in bad.stderr
