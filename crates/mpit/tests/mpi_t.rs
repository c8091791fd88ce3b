//! The safe MPI_T layer against the real MPI library of the build. Each test
//! runs as its own MPI job (see mpit-testkit); tests that hold for one
//! library only are compiled only in builds against it.

use mpit::{Catalogue, Cvar, MpiProcess, MpiT, Object, Scope, Value};
#[cfg(mpi_flavor = "openmpi")]
use mpit::{PvarClass, PvarSession};
use mpit_testkit::{in_rank, run_self};

/// Every variable the catalogue lists can be found again by name (CVARs) or
/// by name and class (PVARs), and refresh after MPI_Init never loses any.
#[test]
fn catalogue_lookups_and_refresh() {
    if !in_rank() {
        run_self("catalogue_lookups_and_refresh", 1).assert_success();
        return;
    }
    let mpit = MpiT::init().expect("MPI_T initialises before MPI_Init");
    let mut catalogue = Catalogue::load(&mpit).unwrap();
    let before = (catalogue.cvars().len(), catalogue.pvars().len());
    // Every CVAR that is not bound can be opened and read with its type
    // before MPI_Init. (After it, Open MPI 4.1 segfaults reading some
    // variables of components it unloaded, e.g. `opal_common_ucx_verbose`;
    // see docs/libraries.md#known-library-bugs-and-their-work-arounds.)
    read_all_unbound(&mpit, &catalogue);
    let mpi = MpiProcess::init().unwrap();
    assert_eq!(mpi.size(), 1);
    let growth = catalogue.refresh(&mpit).unwrap();
    assert_eq!(catalogue.cvars().len(), before.0 + growth.cvars);
    assert_eq!(catalogue.pvars().len(), before.1 + growth.pvars);
    assert!(!catalogue.cvars().is_empty());
    for cvar in catalogue.cvars() {
        assert_eq!(catalogue.cvar(&cvar.name).unwrap().index, cvar.index);
        assert_ne!(cvar.scope, Scope::Unknown, "{}", cvar.name);
    }
    let mut found_by_library = 0;
    for pvar in catalogue.pvars() {
        assert_eq!(
            catalogue.pvar(&pvar.name, pvar.class).unwrap().index,
            pvar.index
        );
        // The library's own lookup agrees where it answers (Open MPI 4.1
        // does not find every variable it lists).
        if let Some(index) = mpit.pvar_index(&pvar.name, pvar.class).unwrap() {
            assert_eq!(index, pvar.index, "{}", pvar.name);
            found_by_library += 1;
        }
    }
    assert!(catalogue.pvars().is_empty() || found_by_library > 0);
    let first = &catalogue.cvars()[0];
    assert_eq!(mpit.cvar_index(&first.name).unwrap(), Some(first.index));
    assert_eq!(mpit.cvar_index("no_such_variable_anywhere").unwrap(), None);
    // A second refresh with nothing new adds nothing.
    assert!(catalogue.refresh(&mpit).unwrap().is_empty());

    drop(mpi);
}

fn read_all_unbound(mpit: &MpiT, catalogue: &Catalogue) {
    let mut opened = 0;
    let unbound: Vec<_> = catalogue
        .cvars()
        .iter()
        .filter(|c| c.binding == mpit::Binding::NoObject)
        .collect();
    for info in &unbound {
        match Cvar::open(mpit, info, Object::None).and_then(|c| c.read().map(|v| (c, v))) {
            Ok((cvar, value)) => {
                match info.datatype {
                    mpit::Datatype::Char => {
                        assert!(matches!(value, Value::Str(_)), "{}", info.name)
                    }
                    _ => assert_eq!(value.len(), cvar.count(), "{}", info.name),
                }
                opened += 1;
            }
            // A typed error naming the variable is acceptable; a wrong value
            // or a crash is not.
            Err(e) => assert_eq!(e.variable(), Some(info.name.as_str())),
        }
    }
    assert!(
        opened * 2 > unbound.len(),
        "{opened} of {} read",
        unbound.len()
    );
}

#[test]
fn library_version_names_the_library() {
    if !in_rank() {
        run_self("library_version_names_the_library", 1).assert_success();
        return;
    }
    let mpit = MpiT::init().unwrap();
    let expected = match mpit_sys::BUILD_HEADER_LIBRARY {
        "openmpi" => mpit::Library::OpenMpi,
        "mvapich2" => mpit::Library::Mvapich2,
        _ => mpit::Library::Mpich,
    };
    assert_eq!(mpit.library(), expected, "{:?}", mpit.library_version());
    assert_eq!(mpit.provided(), mpit::ThreadLevel::Multiple);
}

/// The finalize rows of the version-keyed quirks table agree with the
/// library of this build: `MPI_T_finalize` before and after `MPI_Finalize`,
/// and before `MPI_Init` (then `MPI_Init`), each in a process of its own,
/// crashes exactly where the table says it does (so a library release that fixes or brings a crash fails this
/// test, naming the row to change).
#[test]
fn finalize_quirks_match_the_library() {
    use mpit::quirks::{applies, LibraryVersion, Quirk};
    const NAME: &str = "finalize_quirks_match_the_library";
    if in_rank() {
        let order = std::env::var("MPIT_TEST_FINALIZE_ORDER").unwrap();
        let mpit = MpiT::init().unwrap();
        let version = mpit.library_version().unwrap();
        println!("library-version: {}", version.lines().next().unwrap_or(""));
        if order == "before-init" {
            mpit.finalize_now().unwrap();
            drop(MpiProcess::init().unwrap());
            println!("survived MPI_T_finalize before-init MPI_Finalize");
            return;
        }
        let mpi = MpiProcess::init().unwrap();
        if order == "before" {
            mpit.finalize_now().unwrap();
            // The application goes on communicating (MVAPICH2 2.3.7
            // survives MPI_T_finalize itself and crashes in the next
            // call that sends).
            let mut world = mpit::collective::Collectives::new(mpi.world(), mpi.rank());
            let mut sum = [0];
            world.allreduce_i64(&[1], &mut sum, mpit::collective::ReduceOp::Sum);
            assert!(!world.failed() && sum[0] == 2, "{sum:?}");
            drop(mpi);
        } else {
            drop(mpi);
            mpit.finalize_now().unwrap();
        }
        println!("survived MPI_T_finalize {order} MPI_Finalize");
        return;
    }
    for (order, quirk) in [
        ("before", Quirk::MpiTFinalizeBeforeMpiFinalizeCrashes),
        ("after", Quirk::MpiTFinalizeAfterMpiFinalizeCrashes),
        // MPI_T initialised and finalised before MPI_Init, then MPI_Init.
        ("before-init", Quirk::MpiTFinalizeBeforeMpiInitBreaksInit),
    ] {
        // In the library's default configuration: naming the messaging
        // layer (OMPI_MCA_pml=ob1, as the other tests do) changes the
        // outcome (Open MPI 5.0.11 then survives MPI_T_finalize before
        // MPI_Init, and breaks its MPI_Init without it).
        // Two ranks where the application communicates after MPI_T_finalize.
        let ranks = if order == "before" { 2 } else { 1 };
        let job = mpit_testkit::run_self_env(
            NAME,
            ranks,
            &[("MPIT_TEST_FINALIZE_ORDER", order)],
            &["OMPI_MCA_pml"],
        );
        let out = job.stdout();
        let version = out
            .lines()
            // The line may begin with libtest's "test ... " header.
            .find_map(|l| l.split_once("library-version: ").map(|(_, v)| v))
            .unwrap_or_else(|| panic!("the rank did not say its library:\n{out}"));
        let library = LibraryVersion::parse(version);
        let survived = job.success() && out.contains("survived MPI_T_finalize");
        assert_eq!(
            survived,
            !applies(quirk, &library),
            "MPI_T_finalize {order} MPI_Finalize on {library} ({version}): the library {} but \
             the quirks table says {quirk:?} {}; change its row in crates/mpit/src/quirks.rs\n{}\n{}",
            if survived { "survived" } else { "failed" },
            if applies(quirk, &library) { "applies" } else { "does not apply" },
            out,
            job.stderr()
        );
    }
}

#[test]
fn missing_mpi_fails_loudly() {
    let result = std::panic::catch_unwind(|| mpit_testkit::mpiexec_path_named("no-such-mpiexec"));
    let message = result.expect_err("a missing mpiexec must fail the test");
    let text = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(text.contains("needs MPI"), "{text}");
}

#[cfg(mpi_library = "mpich")]
mod mpich {
    use super::*;

    #[test]
    fn catalogue_has_hundreds_of_scoped_cvars() {
        if !in_rank() {
            run_self("mpich::catalogue_has_hundreds_of_scoped_cvars", 1).assert_success();
            return;
        }
        let mpit = MpiT::init().unwrap();
        let _mpi = MpiProcess::init().unwrap();
        let catalogue = Catalogue::load(&mpit).unwrap();
        assert!(
            catalogue.cvars().len() >= 300,
            "{}",
            catalogue.cvars().len()
        );
        let local = catalogue
            .cvars()
            .iter()
            .filter(|c| c.scope == Scope::Local)
            .count();
        let all_eq = catalogue
            .cvars()
            .iter()
            .filter(|c| c.scope == Scope::AllEq)
            .count();
        assert!(local > 10 && all_eq > 100, "local {local}, all_eq {all_eq}");
        assert_eq!(
            catalogue
                .cvar("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM")
                .unwrap()
                .scope,
            Scope::AllEq
        );
    }

    #[test]
    fn local_cvar_round_trips_after_init() {
        if !in_rank() {
            run_self("mpich::local_cvar_round_trips_after_init", 2).assert_success();
            return;
        }
        let mpit = MpiT::init().unwrap();
        let mpi = MpiProcess::init().unwrap();
        let catalogue = Catalogue::load(&mpit).unwrap();
        let info = catalogue.cvar("MPIR_CVAR_REQUEST_POLL_FREQ").unwrap();
        assert_eq!(info.scope, Scope::Local);
        let cvar = Cvar::open(&mpit, info, Object::None).unwrap();
        let old = cvar.read().unwrap();
        let new = Value::Int(vec![old.as_i64().unwrap() + 7 + i64::from(mpi.rank())]);
        cvar.write(&new).unwrap();
        assert_eq!(cvar.read().unwrap(), new);
        cvar.write(&old).unwrap();
        assert_eq!(cvar.read().unwrap(), old);
        // A value of the wrong shape is refused before MPI sees it.
        let err = cvar.write(&Value::Int(vec![1, 2])).unwrap_err();
        assert_eq!(err.variable(), Some("MPIR_CVAR_REQUEST_POLL_FREQ"));
    }

    #[test]
    fn enum_and_string_cvars_have_their_types() {
        if !in_rank() {
            run_self("mpich::enum_and_string_cvars_have_their_types", 1).assert_success();
            return;
        }
        let mpit = MpiT::init().unwrap();
        let _mpi = MpiProcess::init().unwrap();
        let catalogue = Catalogue::load(&mpit).unwrap();
        let string = catalogue
            .cvars()
            .iter()
            .find(|c| c.datatype == mpit::Datatype::Char)
            .expect("MPICH exports string CVARs");
        let cvar = Cvar::open(&mpit, string, Object::None).unwrap();
        assert!(
            matches!(cvar.read().unwrap(), Value::Str(_)),
            "{}",
            string.name
        );
        let enumerated = catalogue.cvars().iter().find(|c| c.enumeration.is_some());
        if let Some(info) = enumerated {
            let cvar = Cvar::open(&mpit, info, Object::None).unwrap();
            let name = cvar.read_enum_name().unwrap();
            assert!(info.enumeration.as_ref().unwrap().value_of(&name).is_some());
        } else {
            // MPICH 4.0 exports its enumerated settings as strings or ints:
            // an int-typed ALL_EQ algorithm selector reads as an integer.
            let info = catalogue
                .cvar("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM")
                .unwrap();
            let cvar = Cvar::open(&mpit, info, Object::None).unwrap();
            let value = cvar.read().unwrap();
            match info.datatype {
                mpit::Datatype::Char => assert!(value.as_str().is_some()),
                _ => assert!(value.as_i64().is_some()),
            }
        }
    }
}

/// MVAPICH2's own variables (MPICH's ABI, MPICH 3.2 inside): the `mv2_*`
/// PVARs the default policies read, and the start-time algorithm selectors
/// `mpit-tuner tune` sets.
#[cfg(mpi_library = "mvapich2")]
mod mvapich2 {
    use super::*;

    #[test]
    fn catalogue_has_the_mv2_pvars_and_algorithm_cvars() {
        if !in_rank() {
            run_self(
                "mvapich2::catalogue_has_the_mv2_pvars_and_algorithm_cvars",
                1,
            )
            .assert_success();
            return;
        }
        let mpit = MpiT::init().unwrap();
        let _mpi = MpiProcess::init().unwrap();
        let catalogue = Catalogue::load(&mpit).unwrap();
        // How many depends on the configuration (--enable-mpit-pvars):
        // only the ones the default policies name are required.
        for name in [
            "mv2_smp_eager_buffer_max_use",
            "mv2_smp_eager_total_buffer",
            "mv2_vbuf_allocated",
            "mv2_vbuf_freed",
            "mv2_vbuf_available",
        ] {
            assert!(
                catalogue.pvars_named(name).next().is_some(),
                "no PVAR {name}"
            );
        }
        // The research build's per-pool arrays and pool control are not in
        // the release (policies.toml's free-unused-vbufs says so).
        assert!(catalogue
            .pvars_named("mv2_vbuf_allocated_array")
            .next()
            .is_none());
        assert!(catalogue.cvar("MPIR_CVAR_VBUF_POOL_CONTROL").is_none());
        for coll in ["ALLREDUCE", "BCAST", "REDUCE", "ALLGATHER", "ALLTOALL"] {
            let name = format!("MPIR_CVAR_{coll}_COLLECTIVE_ALGORITHM");
            let info = catalogue
                .cvar(&name)
                .unwrap_or_else(|| panic!("no CVAR {name}"));
            assert_eq!(info.scope, Scope::AllEq, "{name}");
        }
    }
}

#[cfg(mpi_flavor = "openmpi")]
mod openmpi {
    use super::*;

    #[test]
    fn queue_pvars_are_bound_to_communicators() {
        if !in_rank() {
            run_self("openmpi::queue_pvars_are_bound_to_communicators", 4).assert_success();
            return;
        }
        let mpit = MpiT::init().unwrap();
        let mpi = MpiProcess::init().unwrap();
        let catalogue = Catalogue::load(&mpit).unwrap();
        let session = PvarSession::new(&mpit).unwrap();
        for name in [
            "pml_ob1_unexpected_msgq_length",
            "pml_ob1_posted_recvq_length",
        ] {
            let info = catalogue.pvar(name, PvarClass::Size).expect(name);
            assert_eq!(info.binding, mpit::Binding::Comm, "{name}");
            // Unbound allocation is refused with a typed error naming it.
            let err = session.open(info, Object::None).unwrap_err();
            assert_eq!(err.variable(), Some(name));
            let mut pvar = session.open(info, Object::Comm(mpi.world())).unwrap();
            assert_eq!(pvar.count(), 4, "{name}");
            pvar.start().unwrap();
            let value = pvar.read().unwrap();
            assert_eq!(value.len(), 4);
            let mut out = [0.0; 4];
            assert_eq!(pvar.read_into(&mut out).unwrap(), 4);
        }
    }

    #[test]
    fn catalogue_grows_across_init() {
        if !in_rank() {
            run_self("openmpi::catalogue_grows_across_init", 1).assert_success();
            return;
        }
        let mpit = MpiT::init().unwrap();
        let mut catalogue = Catalogue::load(&mpit).unwrap();
        let before = catalogue.cvars().len();
        let _mpi = MpiProcess::init().unwrap();
        let growth = catalogue.refresh(&mpit).unwrap();
        assert!(growth.cvars > 0, "Open MPI adds CVARs during MPI_Init");
        assert_eq!(catalogue.cvars().len(), before + growth.cvars);
        assert!(catalogue.cvar("btl_vader_eager_limit").is_some());
    }

    #[test]
    fn refused_writes_are_typed_and_harmless() {
        if !in_rank() {
            run_self("openmpi::refused_writes_are_typed_and_harmless", 2).assert_success();
            return;
        }
        let mpit = MpiT::init().unwrap();
        let _mpi = MpiProcess::init().unwrap();
        let catalogue = Catalogue::load(&mpit).unwrap();
        for scope in [Scope::Readonly, Scope::Constant] {
            let info = catalogue
                .cvars()
                .iter()
                .filter(|c| c.scope == scope && c.binding == mpit::Binding::NoObject)
                .find(|c| Cvar::open(&mpit, c, Object::None).is_ok())
                .unwrap_or_else(|| panic!("Open MPI exports a {scope} CVAR"));
            let cvar = Cvar::open(&mpit, info, Object::None).unwrap();
            let old = cvar.read().unwrap();
            let err = cvar.write(&old).unwrap_err();
            assert!(matches!(err, mpit::Error::NotWritable { .. }), "{err}");
            assert_eq!(err.variable(), Some(info.name.as_str()));
            // The library itself refuses too, with a typed error.
            let err = cvar.write_unchecked(&old).unwrap_err();
            assert_eq!(err.variable(), Some(info.name.as_str()), "{err}");
            assert!(err.mpi_error_name().is_some(), "{err}");
            // ... and the process goes on.
            assert_eq!(cvar.read().unwrap(), old);
        }
        // The eager limit of shared memory, the setting users most want to
        // change, is READONLY and refused by the library (SET_NEVER).
        let limit = catalogue.cvar("btl_vader_eager_limit").unwrap();
        assert_eq!(limit.scope, Scope::Readonly);
        let cvar = Cvar::open(&mpit, limit, Object::None).unwrap();
        let err = cvar.write_unchecked(&Value::Int(vec![65536])).unwrap_err();
        assert!(matches!(err, mpit::Error::SetNever { .. }), "{err}");
        assert_eq!(err.variable(), Some("btl_vader_eager_limit"));
    }
}

/// `every_basic_datatype` takes derived datatypes apart into their basic
/// ones, however they nest: a struct of an int and a double holds both, a
/// contiguous type of a contiguous type of ints only ints, a vector of
/// doubles only doubles; a predefined datatype is its own basic type. (The
/// types `MPI_Type_get_contents` hands out are freed again: a leak would
/// show as an MPI_Type_free error in the next test of the same handles.)
#[test]
fn derived_datatypes_are_taken_apart_into_their_basic_ones() {
    if !in_rank() {
        run_self("derived_datatypes_are_taken_apart_into_their_basic_ones", 1).assert_success();
        return;
    }
    use mpit_sys::MPI_Datatype;
    let _mpi = MpiProcess::init().unwrap();
    let api = mpit_sys::MpiFunctions::load().unwrap();
    let named: Vec<(MPI_Datatype, &str)> = mpit_sys::predefined_datatypes().collect();
    let name_of = |t: MPI_Datatype| named.iter().find(|(d, _)| *d == t).map_or("?", |(_, n)| *n);
    let handle = |name: &str| named.iter().find(|(_, n)| *n == name).unwrap().0;
    let (int, double) = (handle("MPI_INT"), handle("MPI_DOUBLE"));
    // The basic types a datatype is built from, in visiting order.
    let basics = |t: MPI_Datatype| {
        let mut seen = Vec::new();
        let all = mpit::every_basic_datatype(t, &mut |b| {
            seen.push(name_of(b).to_string());
            true
        })
        .unwrap();
        assert!(all);
        seen
    };
    // SAFETY: an integer or a pointer, for which all zero bits are valid;
    // each is set by the library below before use.
    let (mut pair, mut inner, mut outer, mut vector): (MPI_Datatype, _, _, _) = unsafe {
        (
            std::mem::zeroed(),
            std::mem::zeroed(),
            std::mem::zeroed(),
            std::mem::zeroed(),
        )
    };
    // SAFETY: reading a constant of the shim.
    let ok = unsafe { mpit_sys::MPIT_SUCCESS };
    let lengths = [1, 1];
    let displacements: [mpit_sys::MPI_Aint; 2] = [0, 8];
    let types = [int, double];
    // SAFETY: MPI is initialised; each call gets valid in-arrays of the
    // count given and a valid out-pointer, as the standard's prototypes ask.
    unsafe {
        assert_eq!(
            api.PMPI_Type_create_struct.as_ref().unwrap()(
                2,
                lengths.as_ptr(),
                displacements.as_ptr(),
                types.as_ptr(),
                &mut pair,
            ),
            ok
        );
        assert_eq!(
            api.PMPI_Type_contiguous.as_ref().unwrap()(2, int, &mut inner),
            ok
        );
        assert_eq!(
            api.PMPI_Type_contiguous.as_ref().unwrap()(3, inner, &mut outer),
            ok
        );
        assert_eq!(
            api.PMPI_Type_vector.as_ref().unwrap()(4, 1, 2, double, &mut vector),
            ok
        );
    }
    assert_eq!(basics(pair), ["MPI_INT", "MPI_DOUBLE"]);
    assert_eq!(basics(outer), ["MPI_INT"]);
    assert_eq!(basics(vector), ["MPI_DOUBLE"]);
    assert_eq!(basics(int), ["MPI_INT"]);
    let is_int = |t: MPI_Datatype| t == int;
    assert!(!mpit::every_basic_datatype(pair, &mut { is_int }).unwrap());
    assert!(mpit::every_basic_datatype(outer, &mut { is_int }).unwrap());
    assert!(!mpit::every_basic_datatype(vector, &mut { is_int }).unwrap());
    // Taken apart twice more: what get_contents handed out was freed.
    for _ in 0..2 {
        assert_eq!(basics(outer), ["MPI_INT"]);
    }
    // SAFETY: the types made above, each freed once.
    unsafe {
        for t in [&mut pair, &mut outer, &mut inner, &mut vector] {
            assert_eq!(api.PMPI_Type_free.as_ref().unwrap()(t), ok);
        }
    }
}
