#!/bin/sh
# ctest plugin.example: examples/plugin built against an installed moesim
# (cmake --install, find_package(moesim)) and loaded with
# --cache plugin:path=...: the same metrics as the built-in lru, by `run`
# and by `sweep`.
# usage: example.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -eu
src=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > /dev/null
cmake -S "$src/examples/plugin" -B "$work/plugin" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/plugin" > /dev/null
so="$work/plugin/libmoesim_lru_plugin.so"
exe="$work/prefix/bin/moesim"
cd "$work"
"$exe" trace gen --model mixtral-8x7b -o mix.h5 --seed 4 --requests 4 > /dev/null
"$exe" run --trace mix.h5 --model mixtral-8x7b --cache lru --cache-experts 64 --json > lru.json
"$exe" run --trace mix.h5 --model mixtral-8x7b --cache "plugin:path=$so" --cache-experts 64 --json > plugin.json
sed -n '/"metrics"/,$p' lru.json > lru.metrics
sed -n '/"metrics"/,$p' plugin.json > plugin.metrics
[ -s lru.metrics ] && cmp lru.metrics plugin.metrics
grep -q '"name":.*"lru_plugin"' plugin.json
printf '[sweep]\noutput = out.csv\ntrace = mix.h5\nmodel = mixtral-8x7b\ncache = lru, plugin:path=%s\ncache_experts = 48, 64\n' \
    "$so" > spec.ini
"$exe" sweep spec.ini > /dev/null
# each point of lru and of the plugin: the same row but for point, key and cache
awk -F, 'NR > 1 { $1 = $2 = $7 = ""; print }' out.csv | sort | uniq -c | awk '$1 != 2 { bad = 1 } END { exit bad }'
echo "plugin example: lru_plugin = lru on run and sweep"
