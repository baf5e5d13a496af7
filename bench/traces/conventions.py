"""Attribute names read and written, in one place.

OpenTelemetry GenAI semantic conventions (development status; semantic-conventions-genai
``docs/gen-ai/retrieval.md``, ``gen-ai-spans.md``, ``gen-ai-events.md``):
a retrieval span has ``gen_ai.operation.name = retrieval``, the query in
``gen_ai.retrieval.query.text`` and the documents in ``gen_ai.retrieval.documents`` (a JSON
string or structured list of ``{"id", "score"}`` objects; bench adds ``content``); an inference
span has ``gen_ai.operation.name = chat`` (or ``text_completion`` / ``generate_content``),
``gen_ai.request.model``, ``gen_ai.usage.{input,output}_tokens``,
``gen_ai.response.time_to_first_chunk`` (seconds) and ``gen_ai.output.messages``. An
evaluation is a ``gen_ai.evaluation.result`` event (an OTLP log record with that event name,
the evaluated span's trace and span ids) with ``gen_ai.evaluation.name``,
``gen_ai.evaluation.score.value`` / ``.score.label`` and ``gen_ai.evaluation.explanation``.

OpenInference (Arize Phoenix): ``openinference.span.kind`` RETRIEVER / LLM, the query in
``input.value``, documents in ``retrieval.documents.N.document.{id,content,score}``, the answer
in ``output.value`` or ``llm.output_messages.0.message.content``, ``llm.model_name``,
``llm.token_count.{prompt,completion}``, ``user.id`` and ``metadata`` (a JSON object).

Neither defines tenant, route, feedback or confidence: bench reads (and ``bench.serve``
writes) the ``bench.*`` keys below, on any span of the trace or its resource, and the same
names without the ``bench.`` prefix inside OpenInference / Langfuse ``metadata``.
"""

from __future__ import annotations

OP = "gen_ai.operation.name"
OP_RETRIEVAL = "retrieval"
OP_GENERATION = ("chat", "text_completion", "generate_content")
QUERY = "gen_ai.retrieval.query.text"
DOCUMENTS = "gen_ai.retrieval.documents"
TOP_K = "gen_ai.request.top_k"
DATA_SOURCE = "gen_ai.data_source.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TTFT_S = "gen_ai.response.time_to_first_chunk"
OUTPUT_MESSAGES = "gen_ai.output.messages"
PROVIDER = "gen_ai.provider.name"

EVAL_EVENT = "gen_ai.evaluation.result"
EVAL_NAME = "gen_ai.evaluation.name"
EVAL_SCORE = "gen_ai.evaluation.score.value"
EVAL_LABEL = "gen_ai.evaluation.score.label"
EVAL_EXPLANATION = "gen_ai.evaluation.explanation"

OI_KIND = "openinference.span.kind"
OI_INPUT = "input.value"
OI_OUTPUT = "output.value"
OI_DOCS = "retrieval.documents"
OI_MODEL = "llm.model_name"
OI_PROMPT_TOKENS = "llm.token_count.prompt"
OI_COMPLETION_TOKENS = "llm.token_count.completion"
OI_METADATA = "metadata"

USER = "user.id"
TENANT = "bench.tenant"
ROUTE = "bench.route"
THUMBS = "bench.feedback.thumbs"  # +1 / -1 (or "up" / "down")
REGENERATED = "bench.feedback.regenerated"
CONFIDENCE = "bench.confidence"
COST_USD = "bench.cost_usd"
CORPUS_FINGERPRINT = "bench.corpus.fingerprint"
#: the domain tags a request's metadata filter asked for (a document passes when it carries
#: at least one, bench.filters.metadata): a string array, or one comma-separated string
FILTER_TAGS = "bench.filter.tags"
