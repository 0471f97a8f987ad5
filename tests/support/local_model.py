"""How the tests bound the real local model (SmolLM2-135M on llama.cpp): every real part stays, but each
reply is at most 256 tokens, since generating a reply is most of a call's time on a CPU. With one
iteration and one debug round a develop run then takes about a minute on a quiet machine."""

LOCAL_BOUNDS = {"CBR_REPLY_TOKENS": "256"}
