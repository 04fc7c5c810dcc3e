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
#   make dkms-install  (as root, on a distribution kernel) register, build
#                      and install rroce through DKMS for KVER (default:
#                      the running kernel); make dkms-remove undoes it
#   make check-distro  Debian's own 7.3 kernel in the VM: rroce built
#                      through DKMS, loaded, tested against its rdma_rxe
#   make blktests      blktests' nvme group over RDMA, rdma_rxe and rroce
#                      side by side (long: not part of make check)
#   make interop-middleware  rroce in two guests on a virtual Ethernet link:
#                      UCX, libfabric and rsockets between them (long: not
#                      part of make check)
#   make help          the targets, one line each

.PHONY: all module demo check check-distro blktests interop-middleware test-host clippy clean dkms-install dkms-remove help

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

check-distro:
	scripts/check-distro

blktests:
	scripts/blktests

interop-middleware:
	scripts/interop --rroce-pair

# DKMS builds from a copy under /usr/src, named by dkms.conf's version.
DKMS_VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
DKMS_SRC := /usr/src/rroce-$(DKMS_VERSION)
KVER ?= $(shell uname -r)
dkms-install: dkms-remove
	mkdir -p $(DKMS_SRC)
	tar -c --exclude=target --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' \
		--exclude='*.mod' --exclude='*.mod.c' --exclude=rroce_bindings_generated.rs \
		Kbuild Makefile dkms.conf rust csrc include scripts/dkms-make | tar -x -C $(DKMS_SRC)
	dkms add rroce/$(DKMS_VERSION)
	dkms build rroce/$(DKMS_VERSION) -k $(KVER) || { cat /var/lib/dkms/rroce/$(DKMS_VERSION)/build/make.log 2>/dev/null | tail -30; exit 1; }
	dkms install rroce/$(DKMS_VERSION) -k $(KVER)
dkms-remove:
	if dkms status rroce/$(DKMS_VERSION) 2>/dev/null | grep -q .; then dkms remove rroce/$(DKMS_VERSION) --all; fi
	rm -rf $(DKMS_SRC)

check:
	scripts/check

test-host:
	cd rust/proto && cargo test --quiet

# One line per target; keep in step with the list at the top.
help:
	@echo "make                build rroce.ko against the test kernel (toolchain and kernel first if needed)"
	@echo "make KDIR=<tree>    build rroce.ko against your own Rust-enabled 7.3 kernel tree (LLVM=... as for it)"
	@echo "make demo           fresh machine to a running device: builds, boots a guest, prints what rdma-core sees"
	@echo "make check          host tests, every selftest in a guest, interop with rdma_rxe, debug kernel, Debian's kernel once built"
	@echo "make test-host      host unit/property tests of the protocol core only (cargo test)"
	@echo "make clippy         build with the kernel's clippy lints"
	@echo "make clean          remove build products"
	@echo "make dkms-install   (root) register, build and install rroce through DKMS for KVER (default: running kernel)"
	@echo "make dkms-remove    (root) undo dkms-install"
	@echo "make check-distro   Debian's own 7.3 kernel in the VM: rroce through DKMS, tested against its rdma_rxe"
	@echo "make interop-middleware  rroce in two guests on a virtual link: UCX, libfabric, rsockets between them (long)"
	@echo "make blktests       blktests' nvme group over RDMA, rdma_rxe and rroce side by side (long)"
	@echo "make help           this list"
