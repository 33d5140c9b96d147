// Command certs makes the certificates and keys of the development
// Kubernetes control plane (hack/kube/up.sh) into a directory: a CA, the
// API server's serving certificate, client certificates for the admin,
// the controller manager and the kubelet (which also serves with its
// own), and the service-account signing key pair. Existing files are
// kept, so a second run changes nothing.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

func main() {
	dir := flag.String("dir", "", "directory to write into")
	node := flag.String("node", "genesis-node", "the node's name")
	nodeIP := flag.String("ip", "", "the node's address (the kubelet serves on it)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "certs: -dir is required")
		os.Exit(2)
	}
	if err := run(*dir, *node, net.ParseIP(*nodeIP)); err != nil {
		fmt.Fprintln(os.Stderr, "certs:", err)
		os.Exit(1)
	}
}

type pair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func run(dir, node string, nodeIP net.IP) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.pem")); err == nil {
		return nil // made before
	}
	ca, err := issue(nil, pkix.Name{CommonName: "genesis-kube-ca"}, nil, nil, true)
	if err != nil {
		return err
	}
	loop := []net.IP{net.ParseIP("127.0.0.1")}
	nodeIPs := loop
	if nodeIP != nil {
		nodeIPs = []net.IP{net.ParseIP("127.0.0.1"), nodeIP}
	}
	certs := []struct {
		name  string
		subj  pkix.Name
		dns   []string
		ips   []net.IP
		usage []x509.ExtKeyUsage
	}{
		{"apiserver", pkix.Name{CommonName: "kube-apiserver"}, []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, loop, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{"admin", pkix.Name{CommonName: "genesis-admin", Organization: []string{"system:masters"}}, nil, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{"controller-manager", pkix.Name{CommonName: "system:kube-controller-manager"}, nil, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{"scheduler", pkix.Name{CommonName: "system:kube-scheduler"}, nil, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{"apiserver-kubelet-client", pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}, nil, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{"kubelet", pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, []string{node, "localhost"}, nodeIPs,
			[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}},
	}
	for _, c := range certs {
		p, err := issue(ca, c.subj, c.dns, c.ips, false, c.usage...)
		if err != nil {
			return err
		}
		if err := write(dir, c.name, p); err != nil {
			return err
		}
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), sa); err != nil {
		return err
	}
	return write(dir, "ca", ca) // last: its presence means the set is whole
}

func issue(ca *pair, subj pkix.Name, dns []string, ips []net.IP, isCA bool, usage ...x509.ExtKeyUsage) (*pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: subj, DNSNames: dns, IPAddresses: ips,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour), ExtKeyUsage: usage,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, BasicConstraintsValid: true, IsCA: isCA}
	parent, signer := tmpl, key
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else if ca != nil {
		parent, signer = ca.cert, ca.key
	} else {
		return nil, errors.New("a leaf needs a CA")
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return &pair{cert, key}, err
}

func write(dir, name string, p *pair) error {
	if err := writePEM(filepath.Join(dir, name+".pem"), "CERTIFICATE", p.cert.Raw); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+"-key.pem"), p.key)
}

func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
