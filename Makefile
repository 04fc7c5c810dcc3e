# rroce: user entry points. Kbuild (the kernel's build) reads ./Kbuild.
#
#   make               build rroce.ko against the project's test kernel
#                      (installs the toolchain and builds the kernel first
#                      if needed; cached under /var/cache/rroce)
#   make KDIR=<tree>   build against your own Rust-enabled 7.3 kernel tree
#                      with your own toolchain (pass LLVM=... as for it)
#   make demo          fresh machine to a running device with real output
#   make check         host unit tests + all in-guest selftests
#   make test-host     host unit/property tests of the protocol core only
#   make clippy        build with the kernel's clippy lints
#   make clean

.PHONY: all module demo check test-host clippy clean

all: module

ifdef KDIR
module:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules
clippy:
	$(MAKE) -C $(KDIR) M=$(CURDIR) CLIPPY=1 modules
clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
else
module:
	scripts/build-module
clippy:
	scripts/build-module CLIPPY=1
clean:
	rm -rf rust/proto/target
	find . -name '*.o' -o -name '*.ko' -o -name '.*.cmd' -o -name '*.mod' -o -name '*.mod.c' | xargs rm -f
	rm -f modules.order Module.symvers rroce_bindings_generated.rs
endif

demo:
	scripts/demo

check:
	scripts/check

test-host:
	cd rust/proto && cargo test --quiet
