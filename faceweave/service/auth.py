"""Who is calling: API keys and JWT bearer tokens, and a per-caller rate limit.

Credentials are read from ``Authorization: Bearer <key or token>`` or
``X-API-Key: <key>``.  API keys are compared by their sha256 in constant
time.  A bearer value with two dots is a JWT: its ``alg`` must be one of the
configured algorithms (never ``none``), HS* tokens are checked with the
secret and RS* tokens with the public key, and issuer, audience and expiry
are required when configured.  Every failure is :class:`AuthenticationError`
(401) with a message that does not say which check failed beyond the kind.

Each kind of credential has its own owner namespace: an API key of user
``alice`` owns jobs as ``key:alice``, a token with subject ``alice`` as
``jwt:alice``, so that a token cannot read a key user's jobs by naming them.
``auth.jwt_subject_owners`` maps chosen subjects to a key user (the token
then owns as ``key:<user>``); without authentication every caller is ``local``.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from faceweave.errors import AuthenticationError, RateLimitedError
from faceweave.service.settings import LOCAL_USER, MAX_NAME, AuthSettings, LimitSettings

#: the owner prefixes of API-key users and of JWT subjects
KEY_OWNER, JWT_OWNER = "key:", "jwt:"


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: ``user`` is the name its credential gives (the
    key's user, the token's subject); ``owner`` owns the jobs it creates and
    keys its rate limit (``key:<user>``, ``jwt:<subject>`` or ``local``);
    ``method`` is "key", "jwt" or "local"."""

    user: str
    method: str
    owner: str


class Authenticator:
    """Turns request headers into a :class:`Caller` under the auth settings."""

    def __init__(self, settings: AuthSettings) -> None:
        self.settings = settings
        self._keys = tuple((k.digest, k.user) for k in settings.api_keys)
        self._public_key = settings.public_key_pem()

    def identify(self, headers: Mapping[str, str]) -> Caller:
        """The caller of a request with these (lower-case) headers.

        Raises:
            AuthenticationError: authentication is required and the
                credentials are missing, unknown, forged or expired.
        """
        if not self.settings.required:
            return Caller(user=LOCAL_USER, method="local", owner=LOCAL_USER)
        credential = _credential(headers)
        if credential is None:
            raise AuthenticationError("authentication required: send 'Authorization: Bearer <API key or token>'")
        if credential.count(".") == 2 and self.settings.jwt_enabled:
            subject = self._verify_jwt(credential)
            mapped = self.settings.jwt_subject_owners.get(subject)
            owner = KEY_OWNER + mapped if mapped is not None else JWT_OWNER + subject
            return Caller(user=subject, method="jwt", owner=owner)
        user = self._match_key(credential)
        if user is None:
            raise AuthenticationError("invalid API key or token")
        return Caller(user=user, method="key", owner=KEY_OWNER + user)

    def _match_key(self, key: str) -> str | None:
        digest = hashlib.sha256(key.encode("utf-8")).digest()
        found = None
        for stored, user in self._keys:  # compare against every key: no early exit to time
            if hmac.compare_digest(stored, digest):
                found = user
        return found

    def _verify_jwt(self, token: str) -> str:
        import jwt

        s = self.settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthenticationError("invalid token") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in s.jwt_algorithms:
            raise AuthenticationError(f"token algorithm {str(alg)[:16]!r} is not accepted")
        key = s.jwt_secret if alg.startswith("HS") else self._public_key
        if key is None:
            raise AuthenticationError(f"token algorithm {alg} is not configured")
        required = ["exp", s.jwt_user_claim] + (["iss"] if s.jwt_issuer else []) + (["aud"] if s.jwt_audience else [])
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                issuer=s.jwt_issuer,
                audience=s.jwt_audience,
                leeway=s.jwt_leeway_s,
                options={"require": required, "verify_aud": s.jwt_audience is not None},
            )
        except jwt.ExpiredSignatureError:
            raise AuthenticationError("token expired") from None
        except (jwt.InvalidIssuerError, jwt.InvalidAudienceError):
            raise AuthenticationError("token issuer or audience is not accepted") from None
        except jwt.PyJWTError:
            raise AuthenticationError("invalid token") from None
        user = claims.get(s.jwt_user_claim)
        if not isinstance(user, str) or not user or len(user) > MAX_NAME:
            raise AuthenticationError(f"token has no usable '{s.jwt_user_claim}' claim")
        return user


def presented_credential(headers: Mapping[str, str]) -> str | None:
    """The credential a request presents, right or wrong (``None``: none), as
    the failed-authentication limit counts it."""
    try:
        return _credential(headers)
    except AuthenticationError:
        return headers.get("authorization", "").strip() or None


def _credential(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization")
    if value:
        scheme, _, rest = value.strip().partition(" ")
        if scheme.lower() != "bearer" or not rest.strip():
            raise AuthenticationError("use 'Authorization: Bearer <API key or token>'")
        return rest.strip()
    key = headers.get("x-api-key")
    return key.strip() if key and key.strip() else None


class RateLimiter:
    """A token bucket per caller: ``rate_per_second`` refill, ``rate_burst`` capacity.

    Buckets live in this object (one per app); idle full buckets are dropped
    so that memory stays bounded."""

    def __init__(self, limits: LimitSettings, *, max_callers: int = 10_000) -> None:
        self.rate = limits.rate_per_second
        self.burst = float(limits.rate_burst)
        self.max_callers = max_callers
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, caller: str, *, now: float | None = None) -> None:
        """Spend one token of ``caller``'s bucket.

        Raises:
            RateLimitedError: the bucket is empty (``retry_after`` says when a token is back).
        """
        if self.rate <= 0:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.get(caller, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._buckets[caller] = (tokens, now)
                raise RateLimitedError(
                    f"too many requests; at most {self.rate:g} per second (bursts of {self.burst:g})",
                    retry_after=(1.0 - tokens) / self.rate,
                )
            self._buckets[caller] = (tokens - 1.0, now)
            if len(self._buckets) > self.max_callers:
                self._prune(now)

    def _prune(self, now: float) -> None:
        full_after = self.burst / self.rate
        for key, (_, last) in list(self._buckets.items()):
            if now - last >= full_after:
                del self._buckets[key]
