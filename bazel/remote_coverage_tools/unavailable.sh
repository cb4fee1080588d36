#!/bin/sh
echo "bazel coverage is not available offline in keras_bert_zoo; run pytest instead." >&2
exit 1
