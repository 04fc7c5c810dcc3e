rust/rroce_main.o: rust/rroce_main.rs rust/counters.rs rust/device.rs rust/ib/mod.rs rust/ib/device.rs rust/ib/link.rs rust/ib/mmap.rs rust/ib/udata.rs rust/net.rs rust/proto/mod.rs rust/proto/eui.rs rust/proto/icrc.rs rust/proto/limits.rs rust/proto/mtu.rs rust/proto/psn.rs rust/proto/queue.rs rust/proto/wire.rs rust/sys.rs /work/main/rroce_bindings_generated.rs /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libcore.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libcompiler_builtins.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libkernel.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libffi.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libpin_init.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libpin_init_internal.so /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libmacros.so /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libbuild_error.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libzerocopy.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libbindings.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libzerocopy_derive.so /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libuapi.rmeta

rust/.rroce_main.o.d: rust/rroce_main.rs rust/counters.rs rust/device.rs rust/ib/mod.rs rust/ib/device.rs rust/ib/link.rs rust/ib/mmap.rs rust/ib/udata.rs rust/net.rs rust/proto/mod.rs rust/proto/eui.rs rust/proto/icrc.rs rust/proto/limits.rs rust/proto/mtu.rs rust/proto/psn.rs rust/proto/queue.rs rust/proto/wire.rs rust/sys.rs /work/main/rroce_bindings_generated.rs /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libcore.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libcompiler_builtins.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libkernel.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libffi.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libpin_init.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libpin_init_internal.so /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libmacros.so /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libbuild_error.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libzerocopy.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libbindings.rmeta /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libzerocopy_derive.so /var/cache/rroce/kernel-test-93b7f47eddbd/rust/libuapi.rmeta

rust/rroce_main.rs:
rust/counters.rs:
rust/device.rs:
rust/ib/mod.rs:
rust/ib/device.rs:
rust/ib/link.rs:
rust/ib/mmap.rs:
rust/ib/udata.rs:
rust/net.rs:
rust/proto/mod.rs:
rust/proto/eui.rs:
rust/proto/icrc.rs:
rust/proto/limits.rs:
rust/proto/mtu.rs:
rust/proto/psn.rs:
rust/proto/queue.rs:
rust/proto/wire.rs:
rust/sys.rs:
/work/main/rroce_bindings_generated.rs:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libcore.rmeta:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libcompiler_builtins.rmeta:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libkernel.rmeta:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libffi.rmeta:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libpin_init.rmeta:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libpin_init_internal.so:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libmacros.so:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libbuild_error.rmeta:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libzerocopy.rmeta:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libbindings.rmeta:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libzerocopy_derive.so:
/var/cache/rroce/kernel-test-93b7f47eddbd/rust/libuapi.rmeta:

# env-dep:RROCE_BINDINGS=/work/main/rroce_bindings_generated.rs
