{{/*
Names and labels of the chart's objects, and the operator's RBAC rules. Every template takes its
names and labels from here, so that selectors and the objects they select cannot disagree.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "shoal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name: fullnameOverride, or "<release>-<name>" (just the
release when it already contains the name), at most 63 characters. */}}
{{- define "shoal.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The operator's objects: "<fullname>-operator". */}}
{{- define "shoal.operator.fullname" -}}
{{- printf "%s-operator" (include "shoal.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* "<chart>-<version>" for the helm.sh/chart label. */}}
{{- define "shoal.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The image tag: image.tag, or the chart's appVersion. */}}
{{- define "shoal.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The recommended labels (app.kubernetes.io/*, helm.sh/chart) of every object of the chart, without
a component. The topics' pods, which the operator creates, carry app.kubernetes.io/managed-by:
shoal-operator instead; the chart's objects are managed by Helm.
*/}}
{{- define "shoal.labels" -}}
helm.sh/chart: {{ include "shoal.chart" . }}
app.kubernetes.io/name: {{ include "shoal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/part-of: shoal
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The operator's labels: the recommended labels with component "operator". */}}
{{- define "shoal.operator.labels" -}}
{{ include "shoal.labels" . }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* What selects the operator's pods (a Deployment's selector is immutable: keep it small).
The component keeps a topic named like the release out: its pods have component "topic". */}}
{{- define "shoal.operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shoal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* The labels of the chart's other objects (monitoring, dashboard, tests) with a component. */}}
{{- define "shoal.componentLabels" -}}
{{ include "shoal.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* What the operator puts on the pods it creates (reconciler/src/manifests.cc, Labels). */}}
{{- define "shoal.sidecar.selectorLabels" -}}
app.kubernetes.io/managed-by: shoal-operator
app.kubernetes.io/component: topic
{{- end -}}

{{/* The operator's ServiceAccount. */}}
{{- define "shoal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "shoal.operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespaces the operator's Roles go to when it watches some namespaces only: each
watched one and the release namespace (the Lease), once each. */}}
{{- define "shoal.rbacNamespaces" -}}
{{- $all := append .Values.operator.watchNamespaces .Release.Namespace -}}
{{- toYaml (uniq $all) -}}
{{- end -}}

{{/* The namespaces in which topics run, for the NetworkPolicies: the watched ones, else
networkPolicy.namespaces, else the release namespace. */}}
{{- define "shoal.topicNamespaces" -}}
{{- $ns := .Values.operator.watchNamespaces | default .Values.networkPolicy.namespaces -}}
{{- toYaml (uniq ($ns | default (list .Release.Namespace))) -}}
{{- end -}}

{{/*
The operator's RBAC rules: exactly the `rules` of files/operator-rules.yaml, a byte-identical
copy of deploy/rbac/operator-rules.yaml (the list the fake API server enforces in the tests).
No template grants anything else.
*/}}
{{- define "shoal.operator.rules" -}}
{{- $file := .Files.Get "files/operator-rules.yaml" | fromYaml -}}
{{- if or (not $file) (hasKey $file "Error") (not $file.rules) -}}
{{- fail "files/operator-rules.yaml is missing or has no rules: copy deploy/rbac/operator-rules.yaml there" -}}
{{- end -}}
{{- toYaml $file.rules -}}
{{- end -}}
