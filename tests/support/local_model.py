"""How the tests bound the real local model (SmolLM2-135M on llama.cpp): every real part stays, but each
reply is at most 256 tokens (generating it is most of a call's time on a CPU) and the server runs one
thread. llama.cpp's threads spin while they wait for each other, so on a machine whose cores are busy
with other work two threads are several times slower than one (docs/decisions/local-model-tests.md)."""

LOCAL_BOUNDS = {"CBR_REPLY_TOKENS": "256", "CBR_CORES": "1"}
