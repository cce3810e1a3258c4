# libFuzzer target: see below
