"""How the tests bound the real local model (SmolLM2-135M on llama.cpp): every real part stays, but each
reply is at most 256 tokens (generating it is most of a call's time on a CPU).

The server runs on the machine's cores, as a user's does. llama.cpp's threads spin while they wait for each
other, so on cores busy with other work two threads are several times slower than one. The tests that use
these bounds run the model alone: the loop, a deploy and an analysis wait for each reply before any script
runs (docs/decisions/local-model-tests.md)."""

LOCAL_BOUNDS = {"CBR_REPLY_TOKENS": "256"}
