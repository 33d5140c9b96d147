// Test-only preload (node --import): names under $GENESIS_LOOPBACK_DOMAIN
// resolve to 127.0.0.1, so the E2B SDK's host-based URLs
// ({port}-{sandbox}.{domain}) reach the service the test started without a
// DNS server or /etc/hosts. The SDK itself is unmodified.
import dns from 'node:dns';

const suffix = process.env.GENESIS_LOOPBACK_DOMAIN;
const lookup = dns.lookup;
dns.lookup = function (host, opts, cb) {
  if (typeof opts === 'function') { cb = opts; opts = {}; }
  if (typeof opts === 'number') opts = { family: opts };
  if (suffix && typeof host === 'string' && (host === suffix || host.endsWith('.' + suffix))) {
    if (opts && opts.all) return process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }]);
    return process.nextTick(cb, null, '127.0.0.1', 4);
  }
  return lookup.call(this, host, opts, cb);
};
