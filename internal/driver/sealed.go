package driver

// Sealed carries a driver's engine inside the public type its package
// hands users (postgres.Driver, ...), which embeds it. Users see only
// Dialect and Close: the engine's executor could free a slot without the
// fence check, so nothing outside bq may reach it. bq reaches it through
// EngineOf.
type Sealed struct{ engine Driver }

// Seal wraps a driver's engine for its public type.
func Seal(engine Driver) Sealed { return Sealed{engine: engine} }

// Dialect names the database: "postgres", "mysql" or "sqlite".
func (s Sealed) Dialect() string {
	if s.engine == nil {
		return ""
	}
	return string(s.engine.Dialect())
}

// Close releases what the driver opened itself (Open); a pool or
// *sql.DB you passed to New stays open.
func (s Sealed) Close() error {
	if s.engine == nil {
		return nil
	}
	return s.engine.Close()
}

func (s Sealed) sealedEngine() Driver { return s.engine }

// EngineOf returns the engine inside a driver package's public value, or
// nil when d is none (a nil or zero value, or a type of the caller's own).
func EngineOf(d any) Driver {
	s, ok := d.(interface{ sealedEngine() Driver })
	if !ok {
		return nil
	}
	if isNilPointer(d) {
		return nil
	}
	return s.sealedEngine()
}

// EngineAs is EngineOf as the driver's own engine type E (the zero E
// when d holds none, or another's): what its public type's methods read.
func EngineAs[E Driver](d any) E {
	e, _ := EngineOf(d).(E)
	return e
}

// ClientEngine returns the engine a *bq.Client runs on, with the client's
// table prefix, for bq's own white-box tests (the conformance suite, the
// UI's and the command's tests). The root package sets it; users cannot
// import this package.
var ClientEngine func(client any) Driver
