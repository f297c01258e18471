"""Two deployments in one account, as the HyperPod inference operator would leave them (moto).

What the operator creates for an InferenceEndpointConfig: a SageMaker model, endpoint config and endpoint
(AmazonSageMakerHyperPodInferenceAccess grants it Create/Delete of exactly these, conditioned on
``CreatedBy=HyperPodInference``, operator.md S12) and a self-signed certificate it imports into ACM (CRD
``tlsConfig``: "operator auto-generates self-signed certificate"; ``status.tlsCertificate.importedCertificates``
"Tracks imported certificates to ACM"). It tags all of them ``CreatedBy=HyperPodInference``, in every cluster.
Whether it also copies the IEC's ``spec.tags`` onto each (CRD v3.3 description: "the tags to be added to the
Sagemaker Endpoint"; with ``spec.endpointName`` empty "Sagemaker endpoint will not be created") is not published
for models, endpoint configs and certificates [I], so :func:`operator_creates` builds both worlds: ``propagated``
True or False.

The objects' ``status`` fields name what was created: ``InferenceEndpointConfig.status.endpoints.sagemaker.
{endpointArn,configArn,modelArn}`` and ``.tlsCertificate.certificateARN`` (CRD ``inferenceendpointconfigs``),
``SageMakerEndpointRegistration.status.endpoint.{arn,configArn,modelArn}`` (CRD
``sagemakerendpointregistrations``).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

REGION = "us-west-2"
ACCOUNT = "123456789012"  # moto's default account
OPERATOR_TAGS = [{"Key": "CreatedBy", "Value": "HyperPodInference"}]
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerHyperPodInference-x"


@dataclass(frozen=True)
class Tenant:
    """One deployment: its ``name`` and EKS cluster."""

    name: str
    cluster: str

    @property
    def cluster_arn(self) -> str:
        return f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{self.cluster}"

    @property
    def spec_tags(self) -> list[dict[str, str]]:
        """The IEC's ``spec.tags`` as the cdk8s app writes them (hyperpod_core.names), in AWS's Key/Value form."""
        return [{"Key": "deployment", "Value": self.name}, {"Key": "eks-cluster-arn", "Value": self.cluster_arn}]


@dataclass(frozen=True)
class Created:
    """What the operator made for one endpoint (names; the certificate's ARN)."""

    endpoint: str
    endpoint_config: str
    model: str
    certificate: str

    def arn(self, resource_type: str, name: str) -> str:
        return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{resource_type}/{name.lower()}"

    def iec_status(self) -> dict[str, Any]:
        return {"endpoints": {"sagemaker": {"state": "InService",
                                            "endpointArn": self.arn("endpoint", self.endpoint)}},
                "tlsCertificate": {"certificateARN": self.certificate, "importedCertificates": [self.certificate]}}

    def registration_status(self) -> dict[str, Any]:
        return {"state": "CreationCompleted", "endpoint": {
            "arn": self.arn("endpoint", self.endpoint), "configArn": self.arn("endpoint-config", self.endpoint_config),
            "modelArn": self.arn("model", self.model)}}

    def sagemaker_names(self) -> set[str]:
        return {self.endpoint, self.endpoint_config, self.model}


def self_signed_certificate(domain: str) -> tuple[bytes, bytes]:
    """A self-signed certificate and its key (EC P-256: fast to generate), PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, domain)])
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(domain)]), critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def operator_creates(sagemaker: Any, acm: Any, prefix: str, tenant: Tenant | None, *, propagated: bool) -> Created:
    """Model, endpoint config, endpoint and imported certificate named ``<prefix>-...``, tagged as the operator
    tags them; with ``propagated`` also with ``tenant``'s spec.tags. ``tenant`` None: a leftover whose owner
    nothing records (operator tag only)."""
    tags = OPERATOR_TAGS + (tenant.spec_tags if tenant is not None and propagated else [])
    model, config, endpoint = f"{prefix}-model", f"{prefix}-config", f"{prefix}-endpoint"
    sagemaker.create_model(ModelName=model, ExecutionRoleArn=ROLE, Tags=tags,
                           PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/vllm:1"})
    sagemaker.create_endpoint_config(EndpointConfigName=config, Tags=tags, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": model, "InitialInstanceCount": 1,
        "InstanceType": "ml.m5.large"}])
    sagemaker.create_endpoint(EndpointName=endpoint, EndpointConfigName=config, Tags=tags)
    pem, key = self_signed_certificate(f"{prefix}.example.com")
    certificate = acm.import_certificate(Certificate=pem, PrivateKey=key, Tags=tags)["CertificateArn"]
    return Created(endpoint=endpoint, endpoint_config=config, model=model, certificate=certificate)


def sagemaker_names(sagemaker: Any) -> set[str]:
    """Every endpoint, endpoint config and model name in the account."""
    return ({e["EndpointName"] for e in sagemaker.list_endpoints()["Endpoints"]}
            | {c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]}
            | {m["ModelName"] for m in sagemaker.list_models()["Models"]})


def certificate_arns(acm: Any) -> set[str]:
    includes = {"keyTypes": ["RSA_2048", "EC_prime256v1"]}
    return {c["CertificateArn"] for c in acm.list_certificates(Includes=includes)["CertificateSummaryList"]}
