-- A database written by the release before the single schema history
-- (PostgreSQL schema version 5): pg_dump --inserts of the records of
-- release.json, without comments and psql meta-commands.

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

CREATE TABLE public.api_keys (
    seq bigint NOT NULL,
    id text NOT NULL,
    tenant text NOT NULL,
    hash bytea NOT NULL,
    prefix text NOT NULL,
    description text NOT NULL,
    created_at bigint NOT NULL,
    revoked_at bigint
);

ALTER TABLE public.api_keys ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.api_keys_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.artifact_collections (
    job_id text NOT NULL,
    tenant text NOT NULL,
    expires_at bigint NOT NULL,
    doc jsonb NOT NULL
);

CREATE TABLE public.artifacts (
    seq bigint NOT NULL,
    id text NOT NULL,
    tenant text NOT NULL,
    job_id text NOT NULL,
    sha256 text NOT NULL,
    expires_at bigint NOT NULL,
    doc jsonb NOT NULL
);

ALTER TABLE public.artifacts ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.artifacts_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.audit (
    seq bigint NOT NULL,
    "time" bigint NOT NULL,
    actor text NOT NULL,
    tenant text NOT NULL,
    action text NOT NULL,
    target text NOT NULL,
    status integer NOT NULL,
    code text NOT NULL,
    request_id text NOT NULL,
    remote text NOT NULL
);

ALTER TABLE public.audit ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audit_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.jobs (
    seq bigint NOT NULL,
    id text NOT NULL,
    tenant text NOT NULL,
    sandbox_id text NOT NULL,
    command jsonb,
    script text NOT NULL,
    cwd text NOT NULL,
    state text NOT NULL,
    exit_code integer,
    exit_reason text NOT NULL,
    signal text NOT NULL,
    error text NOT NULL,
    stdout_bytes bigint NOT NULL,
    stderr_bytes bigint NOT NULL,
    stdout_truncated boolean NOT NULL,
    stderr_truncated boolean NOT NULL,
    timeout_ms bigint NOT NULL,
    created_at bigint NOT NULL,
    started_at bigint,
    finished_at bigint,
    mode text DEFAULT 'sync'::text NOT NULL
);

ALTER TABLE public.jobs ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.jobs_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.leases (
    seq bigint NOT NULL,
    id text NOT NULL,
    tenant text NOT NULL,
    sandbox_id text NOT NULL,
    state text NOT NULL,
    expires_at bigint NOT NULL,
    created_at bigint NOT NULL,
    doc jsonb NOT NULL
);

ALTER TABLE public.leases ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.leases_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.network_events (
    id bigint NOT NULL,
    sandbox_id text NOT NULL,
    "time" bigint NOT NULL,
    name text NOT NULL,
    address text NOT NULL,
    port integer NOT NULL,
    proto text NOT NULL,
    decision text NOT NULL,
    reason text NOT NULL,
    bytes_up bigint NOT NULL,
    bytes_down bigint NOT NULL
);

ALTER TABLE public.network_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.network_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.sandbox_networks (
    sandbox_id text NOT NULL,
    tenant text NOT NULL,
    status text NOT NULL,
    resource_version bigint NOT NULL,
    doc jsonb NOT NULL
);

CREATE TABLE public.sandboxes (
    seq bigint NOT NULL,
    id text NOT NULL,
    tenant text NOT NULL,
    profile text NOT NULL,
    runtime text NOT NULL,
    risk_level text NOT NULL,
    state text NOT NULL,
    image text NOT NULL,
    resources jsonb NOT NULL,
    env jsonb,
    metadata jsonb,
    container_id text NOT NULL,
    failure_reason text NOT NULL,
    resource_version bigint NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    expires_at bigint,
    instance text DEFAULT ''::text NOT NULL
);

ALTER TABLE public.sandboxes ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.sandboxes_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.schema_migrations (
    version integer NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.sessions (
    id text NOT NULL,
    tenant text NOT NULL,
    sandbox_id text NOT NULL,
    doc jsonb NOT NULL
);

CREATE TABLE public.tenants (
    name text NOT NULL,
    doc jsonb NOT NULL,
    resource_version bigint NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);

INSERT INTO public.api_keys OVERRIDING SYSTEM VALUE VALUES (1, 'key_old', 'acme', '\x0102030000000000000000000000000000000000000000000000000000000009', 'gsk_abcd', 'ci', 1749283750123456789, 1749287350123456789);

INSERT INTO public.artifact_collections VALUES ('job_old', 'acme', 1749370150123456789, '{"spec": {"paths": ["out/*"]}, "state": "done", "job_id": "job_old", "tenant": "acme", "collected": 1, "created_at": "2025-06-07T08:09:10.123456789Z", "expires_at": "2025-06-08T08:09:10.123456789Z", "sandbox_id": "sbx_old", "finished_at": "2025-06-07T08:09:13.123456789Z", "collected_bytes": 5}');

INSERT INTO public.artifacts OVERRIDING SYSTEM VALUE VALUES (1, 'art_old', 'acme', 'job_old', 'abababababababababababababababababababababababababababababababab', 1749370150123456789, '{"id": "art_old", "mime": "text/plain", "name": "a.txt", "path": "out/a.txt", "size": 5, "job_id": "job_old", "sha256": "abababababababababababababababababababababababababababababababab", "tenant": "acme", "created_at": "2025-06-07T08:09:10.123456789Z", "expires_at": "2025-06-08T08:09:10.123456789Z", "sandbox_id": "sbx_old"}');

INSERT INTO public.audit OVERRIDING SYSTEM VALUE VALUES (1, 1749283750123456789, 'key_old', 'acme', 'POST /v1/sandboxes', 'sbx_old', 201, '', 'r1', '127.0.0.1');
INSERT INTO public.audit OVERRIDING SYSTEM VALUE VALUES (2, 1749283751123456789, 'anonymous', '', 'GET /v1/sandboxes', '', 401, 'unauthenticated', 'r2', '');

INSERT INTO public.jobs OVERRIDING SYSTEM VALUE VALUES (2, 'job_script', 'acme', 'sbx_old', NULL, 'ls
', '', 'pending', NULL, '', '', '', 0, 0, false, false, 0, 1749283751123456789, NULL, NULL, 'sync');
INSERT INTO public.jobs OVERRIDING SYSTEM VALUE VALUES (1, 'job_old', 'acme', 'sbx_old', '["echo", "hi"]', '', '/workspace', 'succeeded', 0, 'exited', '', '', 3, 0, true, false, 30000, 1749283750123456789, 1749283752123456789, 1749283753123456789, 'background');

INSERT INTO public.leases OVERRIDING SYSTEM VALUE VALUES (1, 'lse_old', 'acme', 'sbx_old', 'active', 1749287350123456789, 1749283750123456789, '{"id": "lse_old", "warm": false, "state": "active", "tenant": "acme", "profile": "", "runtime": "", "metadata": {"lk": "lv"}, "created_at": "2025-06-07T08:09:10.123456789Z", "expires_at": "2025-06-07T09:09:10.123456789Z", "renewed_at": "2025-06-07T08:09:10.123456789Z", "sandbox_id": "sbx_old", "ttl_seconds": 3600, "resourceVersion": 1}');

INSERT INTO public.network_events OVERRIDING SYSTEM VALUE VALUES (1, 'sbx_old', 1749283750123456789, 'pypi.org', '', 443, 'tcp', 'allow', '', 10, 20);
INSERT INTO public.network_events OVERRIDING SYSTEM VALUE VALUES (2, 'sbx_old', 1749283751123456789, '', '203.0.113.9', 80, 'tcp', 'deny', 'not allowed', 0, 0);

INSERT INTO public.sandbox_networks VALUES ('sbx_old', 'acme', 'active', 1, '{"policy": {"mode": ""}, "status": "active", "tenant": "acme", "gateway_ip": "10.0.0.1", "sandbox_id": "sbx_old", "updated_at": "2025-06-07T08:09:10.123456789Z", "resourceVersion": 1}');

INSERT INTO public.sandboxes OVERRIDING SYSTEM VALUE VALUES (2, 'sbx_pool', '', 'code-python-basic', 'runc', 'low', 'idle', 'genesis/code-python-basic:1', '{"cpu": 1, "pids": 64, "memory_mb": 256}', NULL, NULL, '', '', 1, 1749283750123456789, 1749283750123456789, NULL, 'inst-1');
INSERT INTO public.sandboxes OVERRIDING SYSTEM VALUE VALUES (3, 'sbx_gone', 'acme', 'code-python-basic', 'runc', 'low', 'destroyed', 'genesis/code-python-basic:1', '{"cpu": 1, "pids": 64, "memory_mb": 256}', NULL, NULL, '', '', 1, 1749283750123456789, 1749283750123456789, NULL, 'inst-1');
INSERT INTO public.sandboxes OVERRIDING SYSTEM VALUE VALUES (1, 'sbx_old', 'acme', 'code-python-basic', 'runc', 'low', 'leased', 'genesis/code-python-basic:1', '{"cpu": 1, "pids": 64, "memory_mb": 256}', '{"A": "1", "B": "2"}', '{"k": "v"}', 'c0ffee', 'none yet', 3, 1749283750123456789, 1749283752123456789, 1749287350123456789, 'inst-1');

INSERT INTO public.schema_migrations VALUES (1, '2026-12-01 21:15:25.253004+00');
INSERT INTO public.schema_migrations VALUES (2, '2026-12-01 21:15:25.259298+00');
INSERT INTO public.schema_migrations VALUES (3, '2026-12-01 21:15:25.264971+00');
INSERT INTO public.schema_migrations VALUES (4, '2026-12-01 21:15:25.26855+00');
INSERT INTO public.schema_migrations VALUES (5, '2026-12-01 21:15:25.272777+00');

INSERT INTO public.sessions VALUES ('ses_old', 'acme', 'sbx_old', '{"id": "ses_old", "cwd": "/workspace", "kind": "shell", "runs": 2, "state": "active", "tenant": "acme", "created_at": "2025-06-07T08:09:10.123456789Z", "sandbox_id": "sbx_old", "updated_at": "2025-06-07T08:09:10.123456789Z"}');

INSERT INTO public.tenants VALUES ('acme', '{"name": "acme", "admin": true, "quotas": {"max_cpu": 0, "max_leases": 0, "max_memory_mb": 0, "max_sandboxes": 0}, "source": "config", "weight": 3, "created_at": "2025-06-07T08:09:10.123456789Z", "updated_at": "2025-06-07T08:10:10.123456789Z", "resource_version": 2}', 2, 1749283750123456789, 1749283810123456789);

SELECT pg_catalog.setval('public.api_keys_seq_seq', 1, true);

SELECT pg_catalog.setval('public.artifacts_seq_seq', 1, true);

SELECT pg_catalog.setval('public.audit_seq_seq', 2, true);

SELECT pg_catalog.setval('public.jobs_seq_seq', 2, true);

SELECT pg_catalog.setval('public.leases_seq_seq', 1, true);

SELECT pg_catalog.setval('public.network_events_id_seq', 2, true);

SELECT pg_catalog.setval('public.sandboxes_seq_seq', 3, true);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_hash_key UNIQUE (hash);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.artifact_collections
    ADD CONSTRAINT artifact_collections_pkey PRIMARY KEY (job_id);

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.audit
    ADD CONSTRAINT audit_pkey PRIMARY KEY (seq);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.leases
    ADD CONSTRAINT leases_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.network_events
    ADD CONSTRAINT network_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.sandbox_networks
    ADD CONSTRAINT sandbox_networks_pkey PRIMARY KEY (sandbox_id);

ALTER TABLE ONLY public.sandboxes
    ADD CONSTRAINT sandboxes_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.tenants
    ADD CONSTRAINT tenants_pkey PRIMARY KEY (name);

CREATE INDEX api_keys_tenant_created ON public.api_keys USING btree (tenant, created_at, seq);

CREATE INDEX artifact_collections_expires ON public.artifact_collections USING btree (expires_at);

CREATE INDEX artifacts_expires ON public.artifacts USING btree (expires_at);

CREATE INDEX artifacts_job ON public.artifacts USING btree (job_id, seq);

CREATE INDEX artifacts_sha256 ON public.artifacts USING btree (sha256);

CREATE INDEX audit_target_seq ON public.audit USING btree (target, seq);

CREATE INDEX audit_tenant_seq ON public.audit USING btree (tenant, seq);

CREATE INDEX audit_time ON public.audit USING btree ("time");

CREATE INDEX jobs_created ON public.jobs USING btree (created_at, seq);

CREATE INDEX jobs_sandbox_created ON public.jobs USING btree (sandbox_id, created_at, seq);

CREATE INDEX jobs_state_created ON public.jobs USING btree (state, created_at, seq);

CREATE INDEX jobs_tenant_created ON public.jobs USING btree (tenant, created_at, seq);

CREATE UNIQUE INDEX leases_one_active ON public.leases USING btree (sandbox_id) WHERE (state = 'active'::text);

CREATE INDEX leases_state_expires ON public.leases USING btree (state, expires_at);

CREATE INDEX leases_tenant_created ON public.leases USING btree (tenant, created_at, seq);

CREATE INDEX network_events_sandbox ON public.network_events USING btree (sandbox_id, id);

CREATE INDEX sandboxes_created ON public.sandboxes USING btree (created_at, seq);

CREATE INDEX sandboxes_metadata ON public.sandboxes USING gin (metadata jsonb_path_ops);

CREATE INDEX sandboxes_pool ON public.sandboxes USING btree (state, tenant, profile, runtime, instance, created_at, seq);

CREATE INDEX sandboxes_state_created ON public.sandboxes USING btree (state, created_at, seq);

CREATE INDEX sandboxes_tenant_created ON public.sandboxes USING btree (tenant, created_at, seq);

CREATE INDEX sessions_sandbox ON public.sessions USING btree (sandbox_id);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_tenant_fkey FOREIGN KEY (tenant) REFERENCES public.tenants(name) ON DELETE CASCADE;

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_sandbox_id_fkey FOREIGN KEY (sandbox_id) REFERENCES public.sandboxes(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.leases
    ADD CONSTRAINT leases_sandbox_id_fkey FOREIGN KEY (sandbox_id) REFERENCES public.sandboxes(id);

ALTER TABLE ONLY public.network_events
    ADD CONSTRAINT network_events_sandbox_id_fkey FOREIGN KEY (sandbox_id) REFERENCES public.sandboxes(id);

ALTER TABLE ONLY public.sandbox_networks
    ADD CONSTRAINT sandbox_networks_sandbox_id_fkey FOREIGN KEY (sandbox_id) REFERENCES public.sandboxes(id);

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_sandbox_id_fkey FOREIGN KEY (sandbox_id) REFERENCES public.sandboxes(id);
