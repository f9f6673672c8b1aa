#!/bin/sh
# ADR-0065 D7: recipes live beside the tl context; nothing under the
# scheduler or the engines (src/pe) may know a recipe exists.
src=${abs_top_srcdir:-.}/src
bad=$(grep -lE 'recipes\.h|kb__recipe|softmax_merge' "$src"/pe/*.c "$src"/pe/*.h 2>/dev/null)
if [ -n "$bad" ]; then
	echo "FAIL: recipe knowledge under src/pe: $bad"
	exit 1
fi
# The simulation core knows nothing of PEs either.
bad=$(grep -lE '#include "(pe|tl)/' "$src"/sim/*.c "$src"/sim/*.h 2>/dev/null)
if [ -n "$bad" ]; then
	echo "FAIL: src/sim includes PE or tl headers: $bad"
	exit 1
fi
echo "boundaries hold: src/pe is recipe-free, src/sim is PE-free"
