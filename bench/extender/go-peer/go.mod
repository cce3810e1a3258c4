module tally.dev/bench/extender/go-peer

go 1.22
