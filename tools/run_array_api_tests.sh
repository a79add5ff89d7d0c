#!/usr/bin/env bash
# Run the official array API test suite (data-apis/array-api-tests) against funcgrad.numpy.
#
# Fetches nothing: pass a checkout of array-api-tests whose array-api/ folder holds the spec
# (its git submodule, `git submodule update --init`).  The suite's requirements (pytest,
# pytest-json-report, hypothesis>=6.151, ndindex>=1.8) and funcgrad's own must be installed in
# the Python that runs it (PYTHON=..., default python3); this checkout of funcgrad is put first
# on PYTHONPATH.
#
# Usage:
#   tools/run_array_api_tests.sh PATH/TO/array-api-tests [pytest args...]
#   tools/run_array_api_tests.sh /tmp/array-api-tests -k test_sum      # one test
#   tools/run_array_api_tests.sh /tmp/array-api-tests array_api_tests/test_linalg.py
# Environment: PYTHON, MAX_EXAMPLES (default 20), ARRAY_API_VERSION (default 2024.12).
# Hypothesis deadlines are off (as in JAX's own array-API CI): the first call of each shape
# compiles, which can take longer than the suite's 800 ms on a loaded machine.
set -euo pipefail
if [ $# -lt 1 ] || [ ! -d "$1/array_api_tests" ]; then
    echo "usage: $0 PATH/TO/array-api-tests [pytest args...]" >&2
    echo "  (a checkout of github.com/data-apis/array-api-tests with its array-api submodule)" >&2
    exit 2
fi
SUITE=$(cd "$1" && pwd)
shift
if [ ! -d "$SUITE/array-api/src/array_api_stubs" ]; then
    echo "$0: $SUITE/array-api holds no spec; run git submodule update --init there" >&2
    exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
# With no test paths given, run the whole suite.
HAVE_PATH=0
for a in "$@"; do
    case "$a" in array_api_tests*) HAVE_PATH=1 ;; esac
done
TARGETS=()
[ "$HAVE_PATH" = 1 ] || TARGETS=(array_api_tests/)
cd "$SUITE"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export ARRAY_API_TESTS_MODULE=funcgrad.numpy
export ARRAY_API_TESTS_VERSION=${ARRAY_API_VERSION:-2024.12}
export FUNCGRAD_ENABLE_X64=1
exec "$PYTHON" -m pytest "${TARGETS[@]}" "$@" --max-examples="${MAX_EXAMPLES:-20}" \
    --disable-deadline -p no:cacheprovider -q -rf --disable-warnings
