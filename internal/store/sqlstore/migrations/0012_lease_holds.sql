-- 0012: leases being made. A cold lease counts against its tenant's
-- max_leases from its quota check on, while its sandbox is made, until the
-- claim that stores the lease drops the hold in the same transaction. Every
-- service instance sharing the database counts the holds; a hold whose
-- maker died is ignored once it expires.

CREATE TABLE lease_holds (
    id         TEXT    NOT NULL PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    instance   TEXT    NOT NULL,
    expires_at {{.Time}} NOT NULL
) {{.TableOptions}};

CREATE INDEX lease_holds_tenant ON lease_holds (tenant, expires_at);
CREATE INDEX lease_holds_instance ON lease_holds (instance);
