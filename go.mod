module genesis.dev/sandbox

go 1.26
