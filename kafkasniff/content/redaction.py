"""The one redaction rule: which frame contents may reach an output.

Known secrets are redacted field by field where the layout is known (:mod:`.sasl`: SASL
tokens, SCRAM proofs, passwords, delegation-token HMACs, sensitive configs). That is not
enough when the layout is *not* known for sure: a damaged SaslAuthenticate whose api_key
reads 99 or 18, an orphan response whose request was not captured, a body decoded under a
version its header did not name, or a connection forced into the Kafka 0.7 format whose
frames are really SASL. Their bytes may be anything, secrets included. This rule decides,
for every frame, whether its body may be shown at all; when not, the body becomes one
:class:`~kafkasniff.content.sasl.Redacted` marker (``{"_redacted_body": {"redacted": why,
"size_bytes": n}}``) and no value derived from it (records, topics) is kept.

A body is redacted, unless ``--show-secrets``, when:

1. it is raw or was not decoded to its end (``body_decode_error``, trailing bytes) on a
   connection that has shown a SASL handshake or authentication (SaslHandshake,
   SaslAuthenticate, raw KIP-43 tokens), or when its header's api_key is SASL's;
2. it is an orphan response decoded by guessing its layout, or kept raw because no layout
   fits (the request that would say what it is was not captured);
3. it was decoded under a layout other than its header's (an unknown version read as the
   nearest known one; the KIP-511 ApiVersions fallback to v0 unless the v0 layout fits the
   body exactly, which is what the spec prescribes for that answer);
4. it is a Kafka 0.7 body on a connection whose frames parse as Kafka 0.8+ SaslHandshake or
   SaslAuthenticate requests.

The rule is applied where exchanges are built (:mod:`kafkasniff.pairing`), so every sink
(``read``, ``read --json``, ``export``, ``live``, Spark, the TUI's lists) gets redacted
values; the TUI's detail view, which decodes the frame again from the capture, applies it
again from the exchange's flags (:func:`is_redacted`).
"""

from __future__ import annotations

from kafkasniff.content.frames import DecodedFrame
from kafkasniff.content.sasl import Redacted, is_secret_api
from kafkasniff.issues import IssueKind
from kafkasniff.protocol.apis import API_VERSIONS

__all__ = ["REDACTED_BODY", "reason", "redacted_body", "is_redacted", "SASL_LIKE_07"]

#: the key of the one marker a redacted body holds
REDACTED_BODY = "_redacted_body"

#: why a Kafka 0.7 body is redacted (rule 4)
SASL_LIKE_07 = "Kafka 0.7 body on a connection whose frames parse as SASL requests"

_UNDECODED = frozenset({IssueKind.BODY_DECODE_ERROR, IssueKind.TRAILING_BYTES})


def reason(decoded: DecodedFrame, *, sasl_connection: bool = False, guessed: bool = False,
           orphan: bool = False) -> str | None:
    """Why ``decoded``'s body must not be shown (``None``: it may be).

    ``sasl_connection``: the connection has shown SASL; ``guessed``: an orphan response
    decoded by guessing its layout; ``orphan``: an orphan response kept raw. The caller
    checks ``--show-secrets`` (this rule does not).
    """
    if decoded.body is None and decoded.raw_body is None:
        return None
    if guessed:
        return "orphan response decoded by guessing its layout"
    if orphan:
        return "orphan response whose layout is unknown"
    body = decoded.body
    if body is not None and (REDACTED_BODY in body
                             or type(body.get("_raw_body")) is Redacted):
        return None     # already a marker (the raw rest of a secret-bearing API)
    undecoded = decoded.raw_body is not None or not decoded.complete
    if not undecoded and decoded.issues:
        undecoded = any(i.kind in _UNDECODED for i in decoded.issues)
    if undecoded and (sasl_connection or (decoded.api_key >= 0 and is_secret_api(decoded.api_key))):
        return "undecoded body on a SASL connection" if sasl_connection else \
            "undecoded body of a SASL request or response"
    if decoded.plan is not None and (
            decoded.assumed_version is not None
            or (decoded.layout_version is not None
                and decoded.layout_version != decoded.api_version)):
        if decoded.api_key == API_VERSIONS and decoded.layout_version == 0 and \
                decoded.assumed_version is None and not undecoded:
            return None     # KIP-511: the spec names v0 for this answer, and it fits
        return (f"body decoded under the v{decoded.layout_version} layout, not its "
                f"header's v{decoded.api_version}")
    return None


def redacted_body(why: str, size_bytes: int) -> dict:
    """The body that stands for a redacted one: ``{"_redacted_body": Redacted(why, n)}``."""
    return {REDACTED_BODY: Redacted(why, size_bytes)}


def is_redacted(body: dict | None) -> bool:
    """Whether a message body is the marker of a redacted body."""
    return body is not None and REDACTED_BODY in body
