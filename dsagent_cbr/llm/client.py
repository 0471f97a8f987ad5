"""One client for every LLM call, through the openai SDK: per-call timeout, bounded retries with
exponential backoff and jitter on 429, 5xx and timeouts, one clear sentence for bad keys, unknown
models and unreachable servers, the response cache, and the ledger with its budget."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsagent_cbr.errors import InfrastructureError, OutOfTime
from dsagent_cbr.llm.cache import ResponseCache, request_key
from dsagent_cbr.llm.ledger import BudgetExceeded, CallRecord, Ledger, Usage
from dsagent_cbr.llm.models import ModelSpec

if TYPE_CHECKING:  # openai is imported where it is used: importing the client stays cheap
    import openai

__all__ = ["BudgetExceeded", "Completion", "LLMClient"]

# What cbr keeps of one reply, in characters: some 100k tokens, far past any reply a role asks for
# (their max_tokens hold real replies to a few thousand tokens), and a bound on a broken or hostile
# server's: a 150 MB answer took cbr analyze to 1.3 GB and left 750 MB of run files (journal, cache,
# answer files), and would have gone into later prompts
MAX_REPLY_CHARS = 400_000


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency: float
    cached: bool
    model: str
    parsed: Any = None  # what `validate` made of the text, when the caller gave one
    cut: int = 0  # characters of the reply past MAX_REPLY_CHARS, not kept


class LLMClient:
    def __init__(
        self,
        spec: ModelSpec,
        *,
        ledger: Ledger | None = None,
        cache: ResponseCache | None = None,
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff: float = 1.0,
        default_max_tokens: int | None = None,
        seed: int = 0,
    ) -> None:
        from openai import OpenAI

        self.spec, self.model = spec, spec.alias
        # Each call gets its own sampling seed, derived from the trial's: repeats of a trial with another
        # seed are independent samples (and cache misses), the same seed reproduces a run.
        self.seed = seed
        self._calls = 0
        self.timeout = timeout
        # the count, the ledger and the cache: a --parallel search asks at once
        self._books = threading.Lock()
        self.ledger = ledger or Ledger()
        self.cache = cache
        self.max_retries = max_retries
        self.backoff = backoff
        self.default_max_tokens = default_max_tokens
        # The SDK's own retries are off: the count and the waits are ours, and visible in tests.
        self._sdk = OpenAI(
            base_url=spec.base_url,
            api_key=spec.api_key or "not-needed",
            timeout=timeout,
            max_retries=0,
        )

    def complete(
        self,
        role: str,
        messages: list[dict[str, str]],
        *,
        temperature: float = 0.5,
        max_tokens: int | None = None,
        seed: int | None = None,
        validate: Callable[[str], Any] | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """One call. `validate` parses the text (raising ParseError for an unusable reply); a reply it
        refuses is never cached, so asking again is a new request."""
        with self._books:
            self.ledger.check_budget()
            self._calls += 1
            if seed is None:
                seed = (self.seed * 1_000_003 + self._calls) % 2**31
            # The client's limit caps every call (a role's own, shorter limit still holds)
            limit = min((t for t in (max_tokens, self.default_max_tokens) if t), default=None)
            params: dict[str, Any] = {"temperature": temperature, "max_tokens": limit, "seed": seed}
            key = request_key(self.spec.name, messages, params)
            hit = self.cache.get(key) if self.cache is not None else None
            if hit is not None:
                self.ledger.record(CallRecord(role, self.model, 0, 0, 0.0, 0.0, cached=True))
        if hit is not None:
            return Completion(
                hit["text"],
                0,
                0,
                0.0,
                0.0,
                True,
                self.model,
                validate(hit["text"]) if validate else None,
            )
        start = time.monotonic()
        response = self._call_with_retries(messages, params, timeout)
        latency = time.monotonic() - start
        whole = response.choices[0].message.content or ""
        text, cut = whole[:MAX_REPLY_CHARS], max(0, len(whole) - MAX_REPLY_CHARS)
        usage = response.usage
        p_tok = int(getattr(usage, "prompt_tokens", 0) or 0)
        c_tok = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = self.spec.cost(p_tok, c_tok)
        with self._books:
            self.ledger.record(
                CallRecord(
                    role, self.model, p_tok, c_tok, round(latency, 3), cost, False, reply_cut=cut
                )
            )
        parsed = validate(text) if validate else None  # a ParseError leaves here, before the cache
        if self.cache is not None:
            with self._books:
                self.cache.put(key, self.spec.name, text, p_tok, c_tok)
        return Completion(text, p_tok, c_tok, cost, latency, False, self.model, parsed, cut)

    def usage(self) -> Usage:
        totals = self.ledger.summary()
        return {
            "tokens": int(totals["prompt_tokens"]) + int(totals["completion_tokens"]),
            "cost_usd": round(float(totals["cost"]), 6),
            "calls": totals["calls"],
        }

    def _call_with_retries(
        self, messages: list[dict[str, str]], params: dict[str, Any], deadline: float | None = None
    ) -> Any:
        """The call, retried on a server's transient failures; `deadline` (seconds, a search's budget
        left) cuts it off, retries and their waits included, with OutOfTime, when it comes before the
        client's own timeout."""
        import openai

        kwargs = self._request(messages, params)
        ends = None if deadline is None or deadline >= self.timeout else time.monotonic() + deadline
        where = self.spec.base_url or "the server"
        for attempt in range(self.max_retries + 1):
            if ends is not None:  # each try gets what the budget has left after the ones before
                kwargs["timeout"] = ends - time.monotonic()
                if kwargs["timeout"] <= 0:
                    raise OutOfTime(f"the budget ended while {self.model}'s call was retried")
            try:
                return self._sdk.chat.completions.create(**kwargs)
            except (
                openai.AuthenticationError,
                openai.PermissionDeniedError,
                openai.NotFoundError,
                openai.BadRequestError,
            ) as exc:
                raise self._refusal(exc, where) from exc
            except (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APIConnectionError,
            ) as exc:
                self._raise_unless_retrying(exc, attempt, kwargs.get("timeout"), where)
                self._back_off(attempt)
            except openai.APIStatusError as exc:
                if exc.status_code < 500 or attempt == self.max_retries:
                    raise InfrastructureError(
                        f"{where} answered HTTP {exc.status_code} for {self.model}."
                    ) from exc
                self._back_off(attempt)
        raise AssertionError("unreachable")

    def _request(self, messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        """The SDK call's arguments: a limit on tokens and a seed only when there is one."""
        kwargs: dict[str, Any] = {
            "model": self.spec.name,
            "messages": messages,
            "temperature": params["temperature"],
        }
        if params["max_tokens"]:
            kwargs["max_tokens"] = params["max_tokens"]
        if params["seed"] is not None:
            kwargs["seed"] = params["seed"]
        return kwargs

    def _refusal(self, exc: openai.APIStatusError, where: str) -> InfrastructureError:
        """One sentence for a request the server refuses for good (asking again would not help): the
        key, the access to the model, the model's name or the request itself."""
        import openai

        if isinstance(exc, openai.AuthenticationError):
            return InfrastructureError(
                f"{where} rejected the API key for model {self.model} (HTTP 401)."
            )
        if isinstance(exc, openai.PermissionDeniedError):
            return InfrastructureError(f"{where} refused access to model {self.model} (HTTP 403).")
        if isinstance(exc, openai.NotFoundError):
            return InfrastructureError(
                f"{where} does not know the model {self.spec.name!r} (HTTP 404)."
            )
        return InfrastructureError(f"{where} refused the request for {self.model}: {exc.message}")

    def _raise_unless_retrying(
        self, exc: Exception, attempt: int, timeout: float | None, where: str
    ) -> None:
        """A transient failure (429, 5xx, no connection) returns, to be tried again, unless it was the
        budget's timeout (OutOfTime) or the last try (InfrastructureError)."""
        import openai

        # the budget ended, not the server
        if isinstance(exc, openai.APITimeoutError) and timeout is not None:
            raise OutOfTime(
                f"the budget ended {timeout:.0f} s into a call of {self.model}"
            ) from exc
        if attempt < self.max_retries:
            return
        if isinstance(exc, openai.APIConnectionError) and not isinstance(
            exc, openai.APITimeoutError
        ):
            raise InfrastructureError(
                f"Cannot reach the model server at {where} (is it running?)."
            ) from exc
        raise InfrastructureError(
            f"The model server at {where} kept failing after {attempt + 1} tries: "
            f"{type(exc).__name__}."
        ) from exc

    def _back_off(self, attempt: int) -> None:
        """Exponential backoff with jitter before the next try."""
        time.sleep(self.backoff * (2**attempt) * (0.5 + random.random()))
